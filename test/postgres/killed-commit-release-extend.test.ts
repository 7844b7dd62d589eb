import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import { DbLockError, type LockService } from '../../lib/index.js';
import { createLockApp, eventually } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';
import { pgServerUrl, pgTestsRun } from '../support/pg-test-database.js';
import { rawSession, type RawSession } from '../support/raw-session.js';
import { sessionIdSql, sessionIds } from '../support/server-sessions.js';
import { killWhileRunning, lockWaiters } from '../support/pg-kills.js';
import { forEachStrategy } from '../support/strategies.js';
import { bounded, describeError, outcome } from '../support/settled.js';

/**
 * Lock statements of a held lock (release, extend, the fenced commit of runLocked) interrupted on
 * the server again and again while they wait on db_lock_log, which another session holds in
 * ACCESS EXCLUSIVE mode: pg_cancel_backend (the statement fails with 57014, the session lives on)
 * or pg_terminate_backend (the session ends with 57P01). The caller gets a typed DbLockError within
 * a bound, the held count goes back to 0, the key becomes free again (at once, or after the lease),
 * and after app.close() no session of the app is left on the server. As the MariaDB file with KILL
 * QUERY / KILL CONNECTION; the kills that reached a backend are counted, so a call that never
 * waited cannot pass as killed.
 */

const LEASE_MS = 3_000;
const skip = (await pgTestsRun()) ? false : 'no PostgreSQL server';

forEachStrategy((strategy) => {
  describe(`held-lock statements killed on PostgreSQL (${strategy})`, { skip }, () => {
    let db: TestDatabase;
    let app: INestApplicationContext;
    let locks: LockService;
    let other: INestApplicationContext;
    let otherLocks: LockService;
    let blocker: RawSession;
    let blockerPid: number;
    let tableHeld = false;

    before(async () => {
      db = await TestDatabase.create('dblock', { server: pgServerUrl() });
      await db.query('CREATE TABLE work2 (tag VARCHAR(64) NOT NULL)');
      ({ app, locks } = await createLockApp(db.settings, { strategy, janitor: false, leaseMs: LEASE_MS }));
      ({ app: other, locks: otherLocks } = await createLockApp(db.settings, { strategy, janitor: false, leaseMs: LEASE_MS }));
      blocker = await rawSession(db.settings);
      blockerPid = Number((await blocker.query<{ id: number }[]>(sessionIdSql(db)))[0]!.id);
    });
    after(async () => {
      await blocker?.rollback().catch(() => undefined);
      await blocker?.end().catch(() => undefined);
      await app?.close();
      await other?.close();
      await db?.drop();
    });

    async function holdTable(): Promise<void> {
      await blocker.begin();
      await blocker.query('LOCK TABLE db_lock_log IN ACCESS EXCLUSIVE MODE');
      tableHeld = true;
    }

    async function letTableGo(): Promise<void> {
      if (tableHeld) await blocker.rollback();
      tableHeld = false;
    }

    /** Holds db_lock_log (unless the call does), runs `call`, kills every waiting statement like `like` until it settles (at most `forMs`), lets go. */
    async function killWhile<T>(kill: 'cancel' | 'terminate', like: string, call: () => Promise<T>, forMs: number, holdFirst = true) {
      if (holdFirst) await holdTable();
      try {
        const waiters = () => lockWaiters(db, blockerPid, like);
        const { running, killed, startedAt: started } = await killWhileRunning(db, kill, waiters, call, forMs, true);
        await letTableGo();
        return { ...(await bounded(running, 25_000, like)), killed, tookMs: performance.now() - started };
      } finally {
        await letTableGo();
      }
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

    for (const kill of ['cancel', 'terminate'] as const) {
      it(`fenced commit of runLocked killed (pg_${kill}_backend): typed error, lock given back, key free`, { timeout: 60_000 }, async (t) => {
        const key = `fenced-${kill}`;
        // Key rows exist first.
        await (await otherLocks.acquire(key)).release();
        let ran = false;
        const { error, killed, tookMs } = await killWhile(
          kill,
          '%db_lock_log%',
          () =>
            locks.runLocked(key, async () => {
              ran = true;
              await locks.manager.query('INSERT INTO work2 (tag) VALUES ($1)', [key]);
              // The table held once the grant is through: the fenced commit is what waits on it.
              await bounded(holdTable(), 3_000, 'LOCK TABLE inside the work');
            }),
          6_000,
          false,
        );
        t.diagnostic(`${killed} kill(s), settled after ${Math.round(tookMs)} ms: ${error ? describeError(error) : 'committed'}`);
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
        it(`release killed again and again (pg_${kill}_backend): typed error, held 0, key free after the lease`, { timeout: 60_000 }, async (t) => {
          const key = `release-${kill}`;
          const lock = await locks.acquire(key);
          const { error, killed, tookMs } = await killWhile(kill, '%UPDATE db_lock_log%', () => lock.release(), 6_000);
          t.diagnostic(`${killed} kill(s), settled after ${Math.round(tookMs)} ms: ${error ? describeError(error) : 'released'}`);
          assert.ok(killed >= 1, 'the release was killed');
          assert.ok(error !== undefined, 'the release failed: it was killed for longer than its retries');
          assert.ok(error instanceof DbLockError, `typed: got ${describeError(error)}`);
          assert.equal(locks.stats().held, 0, 'held back to 0');
          await freeForOthers(key, LEASE_MS + 3_000, 'after a failed release');
        });

        it(`extend killed again and again (pg_${kill}_backend): typed error, lock still releasable`, { timeout: 60_000 }, async (t) => {
          const key = `extend-${kill}`;
          const lock = await locks.acquire(key);
          const { error, killed, tookMs } = await killWhile(kill, '%UPDATE db_lock_log%', () => lock.extend(LEASE_MS), 6_000);
          t.diagnostic(`${killed} kill(s), settled after ${Math.round(tookMs)} ms: ${error ? describeError(error) : 'extended'}`);
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

    it('no session of the apps is left after app.close()', { timeout: 60_000 }, async () => {
      const before = (await sessionIds(db)).length;
      await bounded(app.close(), 20_000, 'app.close()');
      await bounded(other.close(), 20_000, 'other.close()');
      let left: number[] = [];
      await eventually(
        async () => {
          left = (await sessionIds(db)).filter((pid) => pid !== blockerPid);
          return left.length === 0;
        },
        3_000,
        'sessions gone',
      ).catch(() => assert.fail(`${left.length} session(s) of the closed apps left (of ${before} before close): pids ${left.join(', ')}`));
      app = undefined as never;
      other = undefined as never;
    });
  });
});
