import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import type { INestApplicationContext } from '@nestjs/common';
import type { LockService } from '../../lib/index.js';
import { TestDatabase } from '../support/test-database.js';
import { createLockApp } from '../support/lock-app.js';
import { contractSuite } from '../support/contract-targets.js';
import { processIdOf } from '../support/lock-internals.js';

/**
 * A process that held nothing for over an hour has its process lease row reaped by the janitor
 * (`reapProcesses`). Its next lock's rows point to a process row that no longer exists until the
 * first renewal re-creates it (an upsert, `ended_count` back at 0). Whoever ends one of those rows
 * meanwhile (forceRelease, a takeover) bumps the `ended_count` of no row; the renewal then reads
 * 0, the count the watchdog last saw, and never looks at the rows: the holder's signal must still
 * abort (README: "It also aborts when the lock is taken over, force-released …").
 */
contractSuite('admin', 'a holder whose process row was reaped while it was idle', { postgres: true }, (target) => {
  let db: TestDatabase;
  let admin: { app: INestApplicationContext; locks: LockService };

  before(async () => {
    db = await TestDatabase.forTarget(target);
    // The janitor's own timer is effectively off: the test runs it.
    admin = await createLockApp(db.settings, target.options({ janitor: { intervalMs: 3_600_000 } }));
  });
  after(async () => {
    await admin?.app.close();
    await db?.drop();
  });

  for (const reaped of [false, true]) {
    it(`a force-released holder's signal aborts at its next renewal (process row ${reaped ? 'reaped while idle' : 'kept'})`, async () => {
      const key = `evict:${reaped}`;
      // A process of its own: nothing of it was ever ended by someone else (its watchdog last saw ended_count 0).
      const holder = await createLockApp(db.settings, target.options({ janitor: false }));
      const processId = processIdOf(holder.locks);
      if (reaped) {
        // Two hours without a lock, hence without a renewal (the clock moved by hand): the janitor reaps the row.
        await db.query(`UPDATE db_lock_process SET renewed_at = renewed_at - INTERVAL '2' HOUR WHERE id = ?`, [processId]);
        await admin.locks.runJanitor();
        assert.equal(
          (await db.query(`SELECT id FROM db_lock_process WHERE id = ?`, [processId])).length,
          0,
          'the janitor reaped the idle process row',
        );
      }
      // 3 s lease: renewals every 1 s.
      const handle = await holder.locks.acquire(key, { leaseMs: 3_000 });
      const evicted = await admin.locks.forceRelease(key, 'operator drill');
      assert.equal(evicted.length, 1, 'the holder was evicted');
      const next = await admin.locks.tryAcquire(key, { leaseMs: 10_000 });
      assert.ok(next, 'the key is free at once');
      try {
        // 2.5 s: two renewals of the holder (at 1 s and 2 s), each reading ended_count; within the 3 s lease.
        await sleep(2_500);
        assert.equal(handle.signal.aborted, true, 'the evicted holder still believes it holds the key another process holds now');
        await assert.rejects(handle.release(), { name: 'LockLostError' });
      } finally {
        await next.release();
        if (!handle.released) await handle.release().catch(() => undefined);
        await holder.app.close();
      }
    });
  }
});
