import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import mysql from 'mysql2/promise';
import { TestDatabase } from '../support/test-database.js';
import type { OpenTransaction } from '../support/open-transactions.js';
import { createLockApp, eventually } from '../support/lock-app.js';
import { LockLostError, type LockService } from '../../lib/index.js';
import { freeze, thaw } from '../support/lock-internals.js';
import { contractSuite } from '../support/contract-targets.js';

/**
 * A holder whose lease has run out must not be able to renew or extend it while another
 * process's grant is taking the key over. The grant counts expired holders with a plain
 * (non-locking) read and marks them EXPIRED a few statements later; a renewal committed in
 * between used to push the old holder's expiry into the future, so the EXPIRED update missed it
 * and both processes held the key and both could pass the fence.
 *
 * The window is made deterministic: an admin INSERT ... SELECT into db_lock_log holds the
 * table's AUTO-INC lock (innodb_autoinc_lock_mode 1) so the grant stops right after counting.
 */

/** Waits until an open transaction of this database passes `filter` (see TestDatabase.transactionSeen). */
async function untilTrx(db: TestDatabase, filter: (t: OpenTransaction) => boolean, what: string): Promise<void> {
  if (!(await db.transactionSeen(filter, 5_000))) throw new Error(`Timed out waiting for ${what}`);
}

/** The blocker's INSERT … SELECT has written a row: it holds the AUTO-INC lock until it ends. */
const blockerWriting = (t: OpenTransaction) => t.rowsModified > 0 && t.text.includes('blocker');

contractSuite('lease-takeover', "grants paused on db_lock_log's AUTO-INC lock", (target) => {
  let db: TestDatabase;
  let oldApp: INestApplicationContext;
  let newApp: INestApplicationContext;
  let oldLocks: LockService;
  let newLocks: LockService;
  before(async () => {
    db = await TestDatabase.create();
    ({ app: oldApp, locks: oldLocks } = await createLockApp(db.settings, target.options()));
    ({ app: newApp, locks: newLocks } = await createLockApp(db.settings, target.options()));
  });
  after(async () => {
    await oldApp?.close();
    await newApp?.close();
    await db?.drop();
  });

  for (const how of ['extend', 'renewal'] as const) {
    it(`an expired holder's ${how} racing a takeover mid-grant loses, and only one holder remains`, async (t) => {
      const [{ mode }] = (await db.query('SELECT @@innodb_autoinc_lock_mode AS mode')) as [{ mode: number }];
      if (Number(mode) !== 1) {
        t.diagnostic(`innodb_autoinc_lock_mode is ${mode}: the grant cannot be paused this way; nothing to check`);
        return;
      }
      const key = `race-${how}`;
      const old = await oldLocks.acquire(key, { leaseMs: 300 });
      freeze(oldLocks); // the old holder's process stalls: no renewal, no local abort
      await eventually(async () => (await newLocks.inspect(key)).holders.length === 0, 5_000, 'the old lease to run out');

      const admin = await mysql.createConnection(db.settings);
      try {
        // Holds the AUTO-INC lock of db_lock_log for ~0.7 s (three rows, 0.35 s of sleep before each):
        // under the 1 s innodb_lock_wait_timeout of the library's sessions, so the grant waits, not fails.
        const blocker = admin.query(
          `INSERT INTO db_lock_log (lock_key, mode, owner, holder, fencing_token, status, lease_ms, acquired_at, expires_at) ` +
            `SELECT 'blocker', 'write', '00000000-0000-0000-0000-000000000000', 'test', rows3.n + FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000) * 10, 'RELEASED', 0, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) ` +
            `FROM (SELECT 1 AS n UNION ALL SELECT 2 UNION ALL SELECT 3) rows3 WHERE SLEEP(0.35) = 0`,
        );
        await untilTrx(db, blockerWriting, 'the blocker to hold the AUTO-INC lock');

        const taking = newLocks.acquire(key, { timeoutMs: 10_000, leaseMs: 30_000 });
        await untilTrx(db, (t) => t.lockWait, 'the takeover grant to wait on the AUTO-INC lock');

        // The old holder, its lease long gone, renews while the grant is paused between its count
        // of live holders and its EXPIRED update.
        let outcome: string;
        if (how === 'extend') {
          outcome = await old.extend(30_000).then(
            () => 'extended',
            (error: unknown) => (error instanceof LockLostError ? 'LockLostError' : String(error)),
          );
        } else {
          thaw(oldLocks); // the process resumes: its watchdog renews from its next tick on
          await eventually(() => old.signal.aborted, 5_000, 'the old holder to learn it lost the lock');
          outcome = (old.signal.reason as Error).name;
        }
        await blocker;
        const fresh = await taking;

        const info = await newLocks.inspect(key);
        assert.deepEqual(
          info.holders.map((h) => h.fencingToken),
          [fresh.fencingToken],
          `two holders at once (old holder's ${how}: ${outcome})`,
        );
        assert.equal(outcome, 'LockLostError');
        assert.deepEqual(
          (await db.logRows(key)).map((r) => r.status),
          ['EXPIRED', 'ACQUIRED'],
        );
        await fresh.release();
        await old.release().catch(() => undefined);
      } finally {
        await admin.end();
      }
    });
  }

  it('a grant waiting longer than innodb_lock_wait_timeout for the AUTO-INC lock is retried within the wait budget', async () => {
    const [{ mode }] = (await db.query('SELECT @@innodb_autoinc_lock_mode AS mode')) as [{ mode: number }];
    if (Number(mode) !== 1) return;
    const admin = await mysql.createConnection(db.settings);
    try {
      // ~2 s of AUTO-INC lock: twice the library sessions' 1 s innodb_lock_wait_timeout.
      const blocker = admin.query(
        `INSERT INTO db_lock_log (lock_key, mode, owner, holder, fencing_token, status, lease_ms, acquired_at, expires_at) ` +
          `SELECT 'blocker', 'write', '00000000-0000-0000-0000-000000000000', 'test', rows3.n + FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000) * 10, 'RELEASED', 0, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) ` +
          `FROM (SELECT 1 AS n UNION ALL SELECT 2 UNION ALL SELECT 3) rows3 WHERE SLEEP(1) = 0`,
      );
      await untilTrx(db, blockerWriting, 'the blocker to hold the AUTO-INC lock');
      const lock = await newLocks.acquire('autoinc', { timeoutMs: 10_000 });
      assert.equal(lock.fencingToken, 1);
      await lock.release();
      await blocker;
    } finally {
      await admin.end();
    }
  });
});
