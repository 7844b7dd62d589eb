import 'reflect-metadata';
import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import { TestDatabase } from '../support/test-database.js';
import { createLockApp } from '../support/lock-app.js';
import { LockService, SemaphoreLimitError } from '../../lib/index.js';
import { contractSuite } from '../support/contract-targets.js';

/**
 * "A caller naming another limit while unexpired permits of the key are live gets
 * SemaphoreLimitError (limit, currentLimit) and nothing is written" (README, Semaphores). A permit
 * held longer than its own lease stays unexpired through its process's renewals: another limit must
 * still be refused at once, not left to wait for a timeout.
 */
contractSuite('semaphore-calls', 'semaphore limit mismatch on a permit held past its own lease', { postgres: true }, (target) => {
  let db: TestDatabase;
  let app: INestApplicationContext;
  let locks: LockService;

  before(async () => {
    db = await TestDatabase.forTarget(target);
    ({ app, locks } = await createLockApp(db.settings, target.options({ janitor: false })));
  });
  after(async () => {
    await app?.close();
    await db?.drop();
  });

  it('control: another limit while a fresh permit is live is refused at once', async () => {
    const permit = await locks.acquireSemaphore('fresh', 2, { leaseMs: 5_000 });
    const started = performance.now();
    await assert.rejects(locks.acquireSemaphore('fresh', 3, { timeoutMs: 3_000 }), SemaphoreLimitError);
    assert.ok(performance.now() - started < 1_000, 'refused at once');
    await permit.release();
  });

  it('another limit while a renewed permit (held past its own leaseMs) is live: SemaphoreLimitError at once', async () => {
    const leaseMs = 300;
    const permit = await locks.acquireSemaphore('renewed', 2, { leaseMs });
    // Renewals every leaseMs / 3 keep it live; wait 3 leases (margin: ×3) so its own expires_at is well past.
    await new Promise((r) => setTimeout(r, 3 * leaseMs));
    assert.equal(permit.signal.aborted, false, 'the permit is still held (renewed)');
    const [row] = await db.logRows('renewed');
    assert.equal(row!.status, 'ACQUIRED');
    assert.ok((row!.lease_ends_at as Date).getTime() > (row!.expires_at as Date).getTime(), 'live by its process renewal, past its own expires_at');
    const started = performance.now();
    let outcome: unknown;
    try {
      const other = await locks.acquireSemaphore('renewed', 3, { timeoutMs: 2_000 });
      await other.release();
      outcome = 'granted';
    } catch (error) {
      outcome = error;
    }
    const waited = performance.now() - started;
    assert.ok(
      outcome instanceof SemaphoreLimitError && outcome.currentLimit === 2,
      `expected SemaphoreLimitError (currentLimit 2) at once, got ${outcome instanceof Error ? `${outcome.name}: ${outcome.message}` : String(outcome)} after ${Math.round(waited)} ms`,
    );
    assert.ok(waited < 1_000, `refused at once, not after ${Math.round(waited)} ms`);
    assert.equal(permit.signal.aborted, false, 'the holder kept its permit');
    assert.equal((await db.logRows('renewed')).length, 1, 'nothing written');
    await permit.release();
  });
});
