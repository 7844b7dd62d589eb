import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import { DbLockError, type LockService } from '../../lib/index.js';
import { createLockApp, eventually } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';
import { pgServerUrl, pgTestsRun } from '../support/pg-test-database.js';
import { killWhileRunning, lockWaiters } from '../support/pg-kills.js';
import { rawSession, type RawSession } from '../support/raw-session.js';
import { sessionIdSql, sessionIds } from '../support/server-sessions.js';
import { forEachStrategy } from '../support/strategies.js';
import { bounded, describeError } from '../support/settled.js';

/**
 * Multi-key grants (and a semaphore permit's grant) blocked on one key's row and interrupted again
 * and again until the caller's budget runs out: pg_cancel_backend (the statement fails with 57014,
 * the session lives on) or pg_terminate_backend (the session ends with 57P01). The caller gets a
 * typed DbLockError within its budget plus a margin, nothing is left granted (the other keys are
 * free to another process at once, not after a lease), stats go back to 0 held and 0 waiting, and
 * the apps leave no connection behind at close. As the MySQL file with KILL QUERY / KILL CONNECTION.
 */

const LEASE_MS = 20_000;
const BUDGET_MS = 2_500;
/** Slack past the budget for a loaded machine (the MySQL file's margin). */
const MARGIN_MS = 3_000;
const skip = (await pgTestsRun()) ? false : 'no PostgreSQL server';

forEachStrategy((strategy) => {
  describe(`multi-key and permit grants killed on PostgreSQL (${strategy})`, { skip }, () => {
    let db: TestDatabase;
    let app: INestApplicationContext;
    let locks: LockService;
    let other: INestApplicationContext;
    let otherLocks: LockService;
    let blocker: RawSession;
    let blockerPid: number;

    before(async () => {
      db = await TestDatabase.forTarget({ serverUrl: pgServerUrl() });
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

    /**
     * Runs `call` while the blocker holds `blockedKey`'s row, interrupting every grant found waiting
     * until the call settles. `killed` counts the signals that reached a backend (the function
     * answered true), so a call that never waited cannot pass as killed.
     */
    async function killedUntilSettled<T>(kill: 'cancel' | 'terminate', blockedKey: string, call: () => Promise<T>) {
      await blocker.begin();
      await blocker.query('SELECT * FROM db_lock WHERE lock_key = ? FOR UPDATE', [Buffer.from(blockedKey)]);
      try {
        const { running, killed, startedAt } = await killWhileRunning(db, kill, () => lockWaiters(db, blockerPid), call, 10_000);
        const result = await bounded(running, 20_000, 'the killed call');
        return { ...result, killed, tookMs: performance.now() - startedAt };
      } finally {
        await blocker.rollback();
      }
    }

    async function assertNothingLive(keys: string[]): Promise<void> {
      for (const key of keys) {
        const live = (await db.logRows(key)).filter((r) => r.status === 'ACQUIRED' || r.status === 'COMPLETED');
        assert.deepEqual(live, [], `no live log row left on ${key}`);
      }
    }

    for (const kill of ['cancel', 'terminate'] as const) {
      it(`multi-key grant killed until its budget runs out (pg_${kill}_backend): typed, nothing left granted`, async (t) => {
        const [a, b] = [`ma-${kill}`, `mb-${kill}`];
        await (await otherLocks.acquire([a, b])).release(); // key rows exist
        const { value, error, killed, tookMs } = await killedUntilSettled(kill, b, () => locks.acquire([a, b], { timeoutMs: BUDGET_MS }));
        if (value) await value.release();
        t.diagnostic(`${killed} kill(s), settled after ${Math.round(tookMs)} ms: ${error ? describeError(error) : 'granted'}`);
        assert.ok(killed >= 1, 'the waiting grant was killed at least once');
        assert.ok(value === undefined, 'not granted: its key row stayed locked by the test');
        assert.ok(error instanceof DbLockError, `typed: got ${describeError(error)}`);
        assert.ok(tookMs < BUDGET_MS + MARGIN_MS, `within the budget plus a margin: took ${Math.round(tookMs)} ms`);
        const stats = locks.stats();
        assert.equal(stats.held, 0, 'held back to 0');
        assert.equal(stats.waiting, 0, 'waiting back to 0');
        // Nothing was left granted: the other process gets both keys at once (a stray row would hold them for the 20 s lease).
        const taken = await bounded(
          otherLocks.acquire([a, b], { timeoutMs: 3_000 }).catch((e: unknown) => {
            throw new Error(`keys not free after the killed multi-key grant: ${describeError(e)}`);
          }),
          10_000,
          'the other acquire',
        );
        await taken.release();
        await assertNothingLive([a, b]);
      });

      if (strategy === 'lease') {
        it(`semaphore permit grant killed until its budget runs out (pg_${kill}_backend): typed, no permit left`, async (t) => {
          const key = `sem-${kill}`;
          await (await otherLocks.acquireSemaphore(key, 1)).release(); // the key row exists
          const { value, error, killed, tookMs } = await killedUntilSettled(kill, key, () =>
            locks.acquireSemaphore(key, 1, { timeoutMs: BUDGET_MS }),
          );
          if (value) await value.release();
          t.diagnostic(`${killed} kill(s), settled after ${Math.round(tookMs)} ms: ${error ? describeError(error) : 'granted'}`);
          assert.ok(killed >= 1, 'the waiting grant was killed at least once');
          assert.ok(value === undefined, 'not granted: its key row stayed locked by the test');
          assert.ok(error instanceof DbLockError, `typed: got ${describeError(error)}`);
          assert.ok(tookMs < BUDGET_MS + MARGIN_MS, `within the budget plus a margin: took ${Math.round(tookMs)} ms`);
          assert.equal(locks.stats().held, 0, 'held back to 0');
          assert.equal(locks.stats().waiting, 0, 'waiting back to 0');
          // The only permit is free at once: a stray permit would hold it for the 20 s lease.
          const permit = await bounded(
            otherLocks.acquireSemaphore(key, 1, { timeoutMs: 3_000 }).catch((e: unknown) => {
              throw new Error(`the only permit was not free after the killed grant: ${describeError(e)}`);
            }),
            10_000,
            'the other permit',
          );
          await permit.release();
          await assertNothingLive([key]);
        });
      }
    }

    it('no connection of the apps is left after app.close()', async () => {
      await bounded(app.close(), 20_000, 'app.close()');
      await bounded(other.close(), 20_000, 'other.close()');
      let left: number[] = [];
      await eventually(
        async () => {
          left = (await sessionIds(db)).filter((pid) => pid !== blockerPid);
          return left.length === 0;
        },
        3_000,
        'connections gone',
      ).catch(() => assert.fail(`${left.length} connection(s) of the closed apps left: pids ${left.join(', ')}`));
      app = undefined as never;
      other = undefined as never;
    });
  });
});
