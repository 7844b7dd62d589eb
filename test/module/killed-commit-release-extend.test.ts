import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import type mysql from 'mysql2/promise';
import { DbLockError, type LockService } from '../../lib/index.js';
import { createLockApp, eventually } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';
import { forEachStrategy } from '../support/strategies.js';
import { bounded, describeError, outcome } from '../support/settled.js';

/**
 * Lock statements of a held lock (release, extend, the fenced commit of runLocked) interrupted on
 * the server (KILL QUERY) or cut with their connection (KILL CONNECTION), again and again while
 * they wait on a table lock: the caller gets a typed DbLockError within a bound, the held count goes
 * back to 0, the key becomes free again (at once, or after the lease), and after app.close() no
 * connection of the app is left on the server.
 */

const LEASE_MS = 3_000;

forEachStrategy((strategy) => {
  describe(`held-lock statements killed (${strategy})`, () => {
    let db: TestDatabase;
    let app: INestApplicationContext;
    let locks: LockService;
    let other: INestApplicationContext;
    let otherLocks: LockService;
    let locker: mysql.Connection;

    before(async () => {
      db = await TestDatabase.create();
      await db.query('CREATE TABLE work2 (tag VARCHAR(64) NOT NULL) ENGINE=InnoDB');
      ({ app, locks } = await createLockApp(db.settings, { strategy, janitor: false, leaseMs: LEASE_MS }));
      ({ app: other, locks: otherLocks } = await createLockApp(db.settings, { strategy, janitor: false, leaseMs: LEASE_MS }));
      locker = await db.session();
    });
    after(async () => {
      await locker?.query('UNLOCK TABLES').catch(() => undefined);
      await app?.close();
      await other?.close();
      await db?.drop();
    });

    async function threads(like: string): Promise<number[]> {
      const rows = await db.query<{ ID: number }[]>(
        `SELECT ID FROM information_schema.PROCESSLIST WHERE DB = ? AND ID <> CONNECTION_ID() AND COMMAND = 'Query' AND INFO LIKE ?`,
        [db.name, like],
      );
      return rows.map((r) => Number(r.ID));
    }

    /** Locks db_lock_log, runs `call`, kills every statement matching `like` until it settles (at most `forMs`), unlocks. */
    async function killWhile<T>(kill: 'QUERY' | 'CONNECTION', like: string, call: () => Promise<T>, forMs: number, lockFirst = true) {
      if (lockFirst) await locker.query('LOCK TABLES db_lock_log WRITE');
      let unlocked = !lockFirst;
      const unlock = async () => {
        if (!unlocked) await locker.query('UNLOCK TABLES');
        unlocked = true;
      };
      tableLocked = () => (unlocked = false);
      let killed = 0;
      try {
        const running = outcome(call());
        let done = false;
        void running.then(() => (done = true));
        const started = performance.now();
        await eventually(async () => done || (await threads(like)).length > 0, 5_000, `a statement like ${like}`);
        while (!done && performance.now() - started < forMs) {
          for (const id of await threads(like))
            await db.query(`KILL ${kill} ${id}`).then(
              () => killed++,
              () => undefined,
            );
          await new Promise((r) => setTimeout(r, 20));
        }
        await unlock();
        return { ...(await bounded(running, 25_000, like)), killed };
      } finally {
        await unlock();
      }
    }

    let tableLocked = (): void => undefined;

    async function freeForOthers(key: string, withinMs: number, what: string): Promise<void> {
      const started = performance.now();
      const lock = await bounded(
        otherLocks.acquire(key, { timeoutMs: withinMs }).catch((e: unknown) => {
          throw new Error(`${what}: the key was not free for another process within ${withinMs} ms: ${describeError(e)}`);
        }),
        withinMs + 5_000,
        `${what}: another process's acquire`,
      );
      await lock.release();
      return void started;
    }

    for (const kill of ['QUERY', 'CONNECTION'] as const) {
      it(`fenced commit of runLocked killed (KILL ${kill}): typed error, lock given back, key free`, async () => {
        const key = `fenced-${kill}`;
        // Key rows exist first.
        await (await otherLocks.acquire(key)).release();
        let ran = false;
        const like = '%db_lock_log%';
        const { error, killed } = await killWhile(
          kill,
          like,
          () =>
            locks.runLocked(key, async () => {
              ran = true;
              await locks.manager.query('INSERT INTO work2 (tag) VALUES (?)', [key]);
              // The table locked once the grant is through: the fenced commit is what waits on it.
              await bounded(locker.query('LOCK TABLES db_lock_log WRITE'), 3_000, 'LOCK TABLES inside the work');
              tableLocked();
            }),
          6_000,
          false,
        );
        assert.ok(ran, 'the work ran');
        assert.ok(killed >= 1, 'the commit was killed');
        assert.ok(error !== undefined, 'the fenced call failed');
        assert.ok(error instanceof DbLockError, `typed: got ${describeError(error)}`);
        assert.ok((error as Error).cause !== undefined, `cause kept: ${describeError(error)}`);
        const [written] = await db.query<{ n: number }[]>('SELECT COUNT(*) AS n FROM work2 WHERE tag = ?', [key]);
        assert.equal(Number(written!.n), 0, `the fenced call failed (${describeError(error)}) but its write was committed`);
        await eventually(() => locks.stats().held === 0, 5_000, 'held back to 0').catch(() =>
          assert.fail(`stats().held stayed ${locks.stats().held} after the failed fenced call`),
        );
        await freeForOthers(key, LEASE_MS + 3_000, 'after a killed fenced commit');
        const live = (await db.logRows(key)).filter((r) => r.status === 'ACQUIRED' || r.status === 'COMPLETED');
        assert.deepEqual(live, [], 'no live log row left');
      });

      if (strategy === 'lease') {
        it(`release killed again and again (KILL ${kill}): typed error, held 0, key free after the lease`, async () => {
          const key = `release-${kill}`;
          const lock = await locks.acquire(key);
          const { error, killed } = await killWhile(kill, '%UPDATE db_lock_log%', () => lock.release(), 6_000);
          assert.ok(killed >= 1, 'the release was killed');
          assert.ok(error !== undefined, 'the release failed: it was killed for longer than its retries');
          assert.ok(error instanceof DbLockError, `typed: got ${describeError(error)}`);
          assert.equal(locks.stats().held, 0, 'held back to 0');
          await freeForOthers(key, LEASE_MS + 3_000, 'after a failed release');
        });

        it(`extend killed again and again (KILL ${kill}): typed error, lock still releasable`, async () => {
          const key = `extend-${kill}`;
          const lock = await locks.acquire(key);
          const { error, killed } = await killWhile(kill, '%UPDATE db_lock_log%', () => lock.extend(LEASE_MS), 6_000);
          assert.ok(killed >= 1, 'the extend was killed');
          assert.ok(error !== undefined, 'the extend failed');
          assert.ok(error instanceof DbLockError, `typed: got ${describeError(error)}`);
          await bounded(outcome(lock.release()), 10_000, 'release after a failed extend');
          assert.equal(locks.stats().held, 0, 'held back to 0');
          await freeForOthers(key, LEASE_MS + 3_000, 'after a failed extend');
          const s = locks.stats();
          assert.equal(s.acquired, s.released + s.lost + s.held, `acquired = released + lost + held: ${JSON.stringify(s)}`);
        });
      }
    }

    it('no connection of the app is left after app.close()', async () => {
      const before = await db.query<{ n: number }[]>(`SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST WHERE DB = ?`, [db.name]);
      await bounded(app.close(), 20_000, 'app.close()');
      await bounded(other.close(), 20_000, 'other.close()');
      let n = -1;
      await eventually(
        async () => {
          const rows = await db.query<{ n: number }[]>(
            `SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST WHERE DB = ? AND ID <> CONNECTION_ID() AND ID <> ?`,
            [db.name, locker.threadId],
          );
          n = Number(rows[0]!.n);
          return n === 0;
        },
        3_000,
        'connections gone',
      ).catch(() => assert.fail(`${n} connection(s) of the closed apps left (of ${before[0]!.n} before close)`));
      app = undefined as never;
      other = undefined as never;
    });
  });
});
