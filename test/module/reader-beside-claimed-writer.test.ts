import 'reflect-metadata';
import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import { TestDatabase } from '../support/test-database.js';
import { createLockApp } from '../support/lock-app.js';
import type { LockHandle, LockService } from '../../lib/index.js';
import { contractSuite } from '../support/contract-targets.js';

/**
 * Exclusion between a writer and a reader of one key (lease, default options, writerPreference on).
 * After this process released a single-key write hold, the key is "known free" at its token T.
 * A new writer then grants with one INSERT claiming T + 1 (the key row is not touched), and a
 * reader's fast try decides with `fencing_token = T` on the key row instead of the log search.
 * When both first tries go out together, the reader must not be granted beside the writer.
 */
contractSuite('lease-mechanics', 'reader beside a one-INSERT writer of a known-free key', { postgres: true }, (target) => {
  let db: TestDatabase;
  let app: INestApplicationContext;
  let locks: LockService;

  before(async () => {
    db = await TestDatabase.forTarget(target);
    ({ app, locks } = await createLockApp(db.settings, target.options({ janitor: false, leaseMs: 5_000 })));
  });
  after(async () => {
    await app?.close();
    await db?.drop();
  });

  it('a writer and a reader never hold one key at once (checked 30 rounds, by handles and by the log)', async (t) => {
    const key = 'rw-known-free';
    let overlaps = 0;
    const detail: string[] = [];
    for (let round = 0; round < 30; round++) {
      // A write hold of this process alone, released: the key is known free at its token.
      const w0 = await locks.acquire(key, { mode: 'write', timeoutMs: 2_000 });
      await w0.release();
      // Two first tries at once: a writer and a reader (a short budget: whichever is refused times out
      // behind the other's hold, which is released only after both settled).
      const [w, r] = await Promise.allSettled([
        locks.acquire(key, { mode: 'write', timeoutMs: 200 }),
        locks.acquire(key, { mode: 'read', timeoutMs: 200 }),
      ]);
      const held = [w, r].flatMap((s) => (s.status === 'fulfilled' ? [s.value as LockHandle] : []));
      for (const s of [w, r]) if (s.status === 'rejected') assert.equal((s.reason as Error).name, 'LockTimeoutError', String(s.reason));
      if (held.length === 2) {
        overlaps++;
        detail.push(`round ${round}: writer token ${held[0]!.fencingToken}, reader token ${held[1]!.fencingToken}`);
      }
      for (const h of held) await h.release();
    }
    // The log, by the server clock: a writer's interval never overlaps any other holder's.
    const rows = await db.logRows(key);
    let logOverlaps = 0;
    const writers = rows.filter((r) => r.mode === 'write');
    for (const wr of writers) {
      for (const other of rows) {
        if (other === wr) continue;
        const a0 = (wr.acquired_at as Date).getTime();
        const a1 = (wr.ended_at as Date).getTime();
        const b0 = (other.acquired_at as Date).getTime();
        const b1 = (other.ended_at as Date).getTime();
        if (a0 < b1 && b0 < a1) logOverlaps++;
      }
    }
    t.diagnostic(`handle overlaps ${overlaps}, log overlaps ${logOverlaps}; ${detail.slice(0, 3).join('; ')}`);
    assert.equal(overlaps, 0, `a writer and a reader were both granted the key in ${overlaps} of 30 rounds: ${detail.join('; ')}`);
    assert.equal(logOverlaps, 0, `${logOverlaps} writer log rows overlapped another holder's`);
  });
});
