import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import type mysql from 'mysql2/promise';
import { DbLockError, type LockService } from '../../lib/index.js';
import { createLockApp, eventually } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';
import { forEachStrategy } from '../support/strategies.js';
import { bounded, describeError } from '../support/settled.js';

/**
 * app.close() while a lock statement is held up on the server (a table lock, or a key row locked
 * by another session): the close settles within a bound, the caller in flight gets a value or a
 * typed DbLockError (never a raw driver/TypeORM error, never a hang), a fenced call's outcome agrees
 * with the database (resolved ⇔ its write committed), the key is free afterwards and no connection
 * of the app is left on the server.
 */

const outcome = <T>(p: Promise<T>) =>
  p.then(
    (value) => ({ value, error: undefined as unknown, ok: true }),
    (error: unknown) => ({ value: undefined as T | undefined, error, ok: false }),
  );

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

forEachStrategy((strategy) => {
  describe(`app.close() in the middle of held-up lock statements (${strategy})`, () => {
    let db: TestDatabase;
    let other: INestApplicationContext;
    let otherLocks: LockService;
    let locker: mysql.Connection;

    before(async () => {
      db = await TestDatabase.create();
      await db.query('CREATE TABLE work_rows (id INT AUTO_INCREMENT PRIMARY KEY, tag VARCHAR(64) NOT NULL) ENGINE=InnoDB');
      ({ app: other, locks: otherLocks } = await createLockApp(db.settings, { strategy, janitor: false }));
      locker = await db.session();
    });
    after(async () => {
      await locker?.query('UNLOCK TABLES').catch(() => undefined);
      await locker?.query('ROLLBACK').catch(() => undefined);
      await other?.close();
      await db?.drop();
    });

    async function appConnections(exclude: number[]): Promise<number> {
      const rows = await db.query<{ n: number }[]>(
        `SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST WHERE DB = ? AND ID <> CONNECTION_ID() AND ID NOT IN (?)`,
        [db.name, exclude],
      );
      return Number(rows[0]!.n);
    }

    /** Connections of this database other than the test's own and the other app's, counted before the app opened. */
    async function noLeak(baseline: number, what: string): Promise<void> {
      let n = -1;
      await eventually(
        async () => {
          n = await appConnections([locker.threadId]);
          return n <= baseline;
        },
        3_000,
        what,
      ).catch(() => assert.fail(`${what}: ${n - baseline} connection(s) of the closed app left on the server`));
    }

    async function freeForOthers(key: string, withinMs: number, what: string): Promise<void> {
      const lock = await bounded(
        otherLocks.acquire(key, { timeoutMs: withinMs }).catch((e: unknown) => {
          throw new Error(`${what}: the key was not free for another process within ${withinMs} ms: ${describeError(e)}`);
        }),
        withinMs + 5_000,
        `${what}: another process's acquire`,
      );
      await lock.release();
    }

    it('close while a fenced commit waits on a table lock: outcome agrees with the database, no leak', async () => {
      const key = 'close-fenced';
      await (await otherLocks.acquire(key)).release();
      const baseline = await appConnections([locker.threadId]);
      const { app, locks } = await createLockApp(db.settings, { strategy, janitor: false, shutdownTimeoutMs: 500 });
      const tag = `fenced-${strategy}`;
      let locked = false;
      const call = outcome(
        locks.runLocked(key, async () => {
          await locks.manager.query('INSERT INTO work_rows (tag) VALUES (?)', [tag]);
          await bounded(locker.query('LOCK TABLES db_lock_log WRITE'), 3_000, 'LOCK TABLES');
          locked = true;
        }),
      );
      await eventually(() => locked, 5_000, 'the table to be locked inside the work');
      await sleep(200); // the fenced commit is sent and waits
      const closing = outcome(bounded(app.close(), 40_000, 'app.close()'));
      await sleep(1_500);
      await locker.query('UNLOCK TABLES');
      const closed = await closing;
      const result = await bounded(call, 20_000, 'the fenced call');
      assert.ok(closed.ok, `app.close() failed: ${describeError(closed.error)}`);
      if (!result.ok) assert.ok(result.error instanceof DbLockError, `typed: got ${describeError(result.error)}`);
      const rows = await db.query<{ n: number }[]>('SELECT COUNT(*) AS n FROM work_rows WHERE tag = ?', [tag]);
      const committed = Number(rows[0]!.n) === 1;
      assert.equal(
        committed,
        result.ok,
        `the fenced call ${result.ok ? 'resolved' : `failed (${describeError(result.error)})`} but its write was ${committed ? '' : 'not '}committed`,
      );
      await freeForOthers(key, 3_000, 'after close');
      await noLeak(baseline, 'after close during a fenced commit');
    });

    it('close while a waiter is blocked on a locked key row: typed rejection, prompt close, no leak', async () => {
      const key = 'close-waiter';
      await (await otherLocks.acquire(key)).release();
      const baseline = await appConnections([locker.threadId]);
      const { app, locks } = await createLockApp(db.settings, { strategy, janitor: false, shutdownTimeoutMs: 500 });
      await locker.query('START TRANSACTION');
      await locker.query('SELECT * FROM db_lock WHERE lock_key = ? FOR UPDATE', [Buffer.from(key)]);
      try {
        const waiting = outcome(locks.acquire(key, { timeoutMs: 30_000 }));
        await sleep(700);
        const started = performance.now();
        const closed = await outcome(bounded(app.close(), 20_000, 'app.close()'));
        const closeMs = performance.now() - started;
        const result = await bounded(waiting, 10_000, 'the waiter');
        if (result.value) await result.value.release().catch(() => undefined);
        assert.ok(closed.ok, `app.close() failed: ${describeError(closed.error)}`);
        assert.ok(!result.ok, 'the waiter was not granted: the key row stayed locked');
        assert.ok(result.error instanceof DbLockError, `typed: got ${describeError(result.error)}`);
        assert.ok(closeMs < 5_000, `close took ${Math.round(closeMs)} ms behind a waiter blocked in the server`);
      } finally {
        await locker.query('ROLLBACK');
      }
      await freeForOthers(key, 3_000, 'after close');
      await noLeak(baseline, 'after close during a blocked wait');
    });

    if (strategy === 'lease') {
      it('close while a release is held up on a table lock: close settles, release typed, no leak, key free', async () => {
        const key = 'close-release';
        await (await otherLocks.acquire(key)).release();
        const baseline = await appConnections([locker.threadId]);
        const { app, locks } = await createLockApp(db.settings, { strategy, janitor: false, shutdownTimeoutMs: 500, leaseMs: 4_000 });
        const lock = await locks.acquire(key);
        await locker.query('LOCK TABLES db_lock_log WRITE');
        const releasing = outcome(bounded(lock.release(), 40_000, 'release'));
        await sleep(300);
        const closing = outcome(bounded(app.close(), 40_000, 'app.close()'));
        await sleep(1_500);
        await locker.query('UNLOCK TABLES');
        const closed = await closing;
        const released = await releasing;
        assert.ok(closed.ok, `app.close() failed: ${describeError(closed.error)}`);
        if (!released.ok) assert.ok(released.error instanceof DbLockError, `typed: got ${describeError(released.error)}`);
        await freeForOthers(key, 6_000, 'after close');
        await noLeak(baseline, 'after close during a release');
      });
    }
  });
});
