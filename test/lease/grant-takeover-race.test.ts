import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import { TestDatabase } from '../support/test-database.js';
import type { OpenTransaction } from '../support/open-transactions.js';
import { createLockApp, eventually } from '../support/lock-app.js';
import { LockLostError, type LockHandle, type LockService } from '../../lib/index.js';
import { acquisitionIdOf, freeze, thaw } from '../support/lock-internals.js';
import { contractSuite } from '../support/contract-targets.js';
import { rawSession } from '../support/raw-session.js';

/**
 * A holder whose lease has run out must not be able to renew or extend it while another
 * process's grant is taking the key over. The grant counts expired holders with a plain
 * (non-locking) read and marks them EXPIRED a few statements later; a renewal committed in
 * between used to push the old holder's expiry into the future, so the EXPIRED update missed it
 * and both processes held the key and both could pass the fence.
 *
 * The window is made deterministic: an admin INSERT ... SELECT into db_lock_log holds the
 * table's AUTO-INC lock (innodb_autoinc_lock_mode 1) so the grant stops right after counting.
 * On PostgreSQL the grant's takeover locks the holders' processes FOR SHARE, then picks the
 * expired holders and ends them in one statement: an admin session holding the old holder's log
 * row stops the grant in that statement, after it picked the holder and before it ends it.
 */

/** Waits until an open transaction of this database passes `filter` (see TestDatabase.transactionSeen). */
async function untilTrx(db: TestDatabase, filter: (t: OpenTransaction) => boolean, what: string): Promise<void> {
  if (!(await db.transactionSeen(filter, 5_000))) throw new Error(`Timed out waiting for ${what}`);
}

/** The blocker's INSERT … SELECT has written a row: it holds the AUTO-INC lock until it ends. */
const blockerWriting = (t: OpenTransaction) => t.rowsModified > 0 && t.text.includes('blocker');

/** MySQL: an INSERT … SELECT into db_lock_log holding its AUTO-INC lock, `sleepS` seconds before each of three rows. */
const autoIncBlocker = (sleepS: number) =>
  `INSERT INTO db_lock_log (lock_key, mode, owner, holder, fencing_token, status, lease_ms, acquired_at, expires_at) ` +
  `SELECT 'blocker', 'write', '00000000-0000-0000-0000-000000000000', 'test', rows3.n + FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000) * 10, 'RELEASED', 0, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) ` +
  `FROM (SELECT 1 AS n UNION ALL SELECT 2 UNION ALL SELECT 3) rows3 WHERE SLEEP(${sleepS}) = 0`;

/** The grant's pause: `end()` lets it go on (MySQL: waits for the blocker, which ends by itself). */
interface Pause {
  end(): Promise<void>;
  close(): Promise<void>;
}

/**
 * Pauses the next grant of the old holder's key mid-takeover (see the file's comment). MySQL:
 * the AUTO-INC blocker (~0.7 s, three rows, 0.35 s of sleep before each: under the 1 s
 * innodb_lock_wait_timeout of the library's sessions, so the grant waits, not fails).
 * PostgreSQL: the old holder's log row held FOR UPDATE (under the grant's 1 s lock_timeout).
 */
async function pauseTakeover(db: TestDatabase, old: LockHandle): Promise<Pause> {
  const admin = await rawSession(db.settings);
  if (db.type === 'postgres') {
    await admin.begin();
    await admin.query('SELECT id FROM db_lock_log WHERE owner = ? FOR UPDATE', [acquisitionIdOf(old)]);
    let ended: Promise<void> | undefined;
    return { end: () => (ended ??= admin.commit()), close: () => admin.end() };
  }
  const blocker = admin.query(autoIncBlocker(0.35));
  await untilTrx(db, blockerWriting, 'the blocker to hold the AUTO-INC lock');
  return { end: async () => void (await blocker), close: () => admin.end() };
}

/** Sessions of this database waiting for a lock (PostgreSQL: the paused grant, and a statement queued behind it). */
async function lockWaiters(db: TestDatabase): Promise<number> {
  return (await db.openTransactions()).filter((t) => t.lockWait).length;
}

contractSuite('lease-takeover', 'grants paused mid-takeover (MySQL: on db_lock_log AUTO-INC lock)', { postgres: true }, (target) => {
  let db: TestDatabase;
  let oldApp: INestApplicationContext;
  let newApp: INestApplicationContext;
  let oldLocks: LockService;
  let newLocks: LockService;
  before(async () => {
    db = await TestDatabase.forTarget(target);
    ({ app: oldApp, locks: oldLocks } = await createLockApp(db.settings, target.options()));
    ({ app: newApp, locks: newLocks } = await createLockApp(db.settings, target.options()));
  });
  after(async () => {
    await oldApp?.close();
    await newApp?.close();
    await db?.drop();
  });

  /** MySQL: the AUTO-INC lock mode, or undefined where the grant can be paused this way (PostgreSQL, or mode 1). */
  async function autoIncUnusable(): Promise<number | undefined> {
    if (db.type === 'postgres') return undefined;
    const [{ mode }] = (await db.query('SELECT @@innodb_autoinc_lock_mode AS mode')) as [{ mode: number }];
    return Number(mode) === 1 ? undefined : Number(mode);
  }

  for (const how of ['extend', 'renewal'] as const) {
    it(`an expired holder's ${how} racing a takeover mid-grant loses, and only one holder remains`, async (t) => {
      const mode = await autoIncUnusable();
      if (mode !== undefined) {
        t.diagnostic(`innodb_autoinc_lock_mode is ${mode}: the grant cannot be paused this way; nothing to check`);
        return;
      }
      const key = `race-${how}`;
      const old = await oldLocks.acquire(key, { leaseMs: 300 });
      freeze(oldLocks); // the old holder's process stalls: no renewal, no local abort
      await eventually(async () => (await newLocks.inspect(key)).holders.length === 0, 5_000, 'the old lease to run out');

      const pause = await pauseTakeover(db, old);
      try {
        const taking = newLocks.acquire(key, { timeoutMs: 10_000, leaseMs: 30_000 });
        await untilTrx(db, (t) => t.lockWait, 'the takeover grant to wait mid-takeover');

        // The old holder, its lease long gone, renews while the grant is paused between its count
        // of live holders and its EXPIRED update.
        const racing: Promise<string> =
          how === 'extend'
            ? old.extend(30_000).then(
                () => 'extended',
                (error: unknown) => (error instanceof LockLostError ? 'LockLostError' : String(error)),
              )
            : (thaw(oldLocks), // the process resumes: its watchdog renews from its next tick on
              eventually(() => old.signal.aborted, 5_000, 'the old holder to learn it lost the lock').then(() => (old.signal.reason as Error).name));
        if (db.type === 'postgres') {
          // PostgreSQL: the extend waits for the old holder's row; the thawed process's statements
          // (its row ended at its lease's end, a renewal of its process row, which the grant locked
          // FOR SHARE) wait for that row or the process row: behind the paused grant, let go once they wait.
          await eventually(async () => (await lockWaiters(db)) >= 2, 900, `the ${how} to wait behind the paused grant`);
          await pause.end();
        }
        const outcome = await racing;
        await pause.end();
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
        await pause.close();
      }
    });
  }

  it('a grant waiting longer than its session lock wait timeout is retried within the wait budget', async () => {
    if ((await autoIncUnusable()) !== undefined) return;
    const admin = await rawSession(db.settings);
    try {
      // ~2 s of a lock the grant waits for: twice the library sessions' 1 s lock wait timeout
      // (MySQL: innodb_lock_wait_timeout, for the AUTO-INC lock; PostgreSQL: lock_timeout, for the
      // key's row, inserted by another transaction that commits nothing).
      let blocker: Promise<unknown>;
      if (db.type === 'postgres') {
        await admin.begin();
        await admin.query('INSERT INTO db_lock (lock_key) VALUES (?)', [Buffer.from('autoinc')]);
        blocker = new Promise((r) => setTimeout(r, 2_000)).then(() => admin.rollback());
      } else {
        blocker = admin.query(autoIncBlocker(1));
        await untilTrx(db, blockerWriting, 'the blocker to hold the AUTO-INC lock');
      }
      const lock = await newLocks.acquire('autoinc', { timeoutMs: 10_000 });
      assert.equal(lock.fencingToken, 1);
      await lock.release();
      await blocker;
    } finally {
      await admin.end();
    }
  });
});
