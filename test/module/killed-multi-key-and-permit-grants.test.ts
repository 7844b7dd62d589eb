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
 * Multi-key grants (and a semaphore permit's grant) blocked on one key's row and killed again and
 * again (KILL QUERY / KILL CONNECTION) until the caller's budget runs out: the caller gets a typed
 * DbLockError within its budget plus a margin, nothing is left granted (the other keys are free to
 * another process at once, not after a lease), stats go back to 0 held and 0 waiting, and the app
 * leaves no connection behind at close.
 */

const LEASE_MS = 20_000;

forEachStrategy((strategy) => {
  describe(`multi-key and permit grants killed (${strategy})`, () => {
    let db: TestDatabase;
    let app: INestApplicationContext;
    let locks: LockService;
    let other: INestApplicationContext;
    let otherLocks: LockService;
    let blocker: mysql.Connection;

    before(async () => {
      db = await TestDatabase.create();
      ({ app, locks } = await createLockApp(db.settings, { strategy, janitor: false, leaseMs: LEASE_MS }));
      ({ app: other, locks: otherLocks } = await createLockApp(db.settings, { strategy, janitor: false, leaseMs: LEASE_MS }));
      blocker = await db.session();
    });
    after(async () => {
      await blocker?.query('ROLLBACK').catch(() => undefined);
      await app?.close();
      await other?.close();
      await db?.drop();
    });

    /** Threads of this database other than the test's own, running a statement on the lock tables. */
    async function libraryStatements(): Promise<number[]> {
      const rows = await db.query<{ ID: number }[]>(
        `SELECT ID FROM information_schema.PROCESSLIST WHERE DB = ? AND ID <> CONNECTION_ID() AND ID <> ? AND COMMAND = 'Query' ` +
          `AND INFO LIKE '%db_lock%'`,
        [db.name, blocker.threadId],
      );
      return rows.map((r) => Number(r.ID));
    }

    async function killedUntilSettled<T>(kill: 'QUERY' | 'CONNECTION', blockedKey: string, call: () => Promise<T>) {
      await blocker.query('START TRANSACTION');
      await blocker.query('SELECT * FROM db_lock WHERE lock_key = ? FOR UPDATE', [Buffer.from(blockedKey)]);
      let killed = 0;
      try {
        const started = performance.now();
        const running = outcome(call());
        let done = false;
        void running.then(() => (done = true));
        while (!done && performance.now() - started < 10_000) {
          for (const id of await libraryStatements())
            await db.query(`KILL ${kill} ${id}`).then(
              () => killed++,
              () => undefined,
            );
          await new Promise((r) => setTimeout(r, 20));
        }
        const result = await bounded(running, 20_000, 'the killed call');
        return { ...result, killed, tookMs: performance.now() - started };
      } finally {
        await blocker.query('ROLLBACK');
      }
    }

    for (const kill of ['QUERY', 'CONNECTION'] as const) {
      it(`multi-key grant killed until its budget runs out (KILL ${kill}): typed, nothing left granted`, async () => {
        const [a, b] = [`ma-${kill}`, `mb-${kill}`];
        await (await otherLocks.acquire([a, b])).release(); // key rows exist
        const { value, error, killed, tookMs } = await killedUntilSettled(kill, b, () => locks.acquire([a, b], { timeoutMs: 2_500 }));
        if (value) await value.release();
        assert.ok(killed >= 1, 'the grant was killed at least once');
        assert.ok(value === undefined, 'not granted: its key row stayed locked by the test');
        assert.ok(error instanceof DbLockError, `typed: got ${describeError(error)}`);
        assert.ok(tookMs < 2_500 + 3_000, `within the budget plus a margin: took ${Math.round(tookMs)} ms`);
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
        for (const key of [a, b]) {
          const live = (await db.logRows(key)).filter((r) => r.status === 'ACQUIRED' || r.status === 'COMPLETED');
          assert.deepEqual(live, [], `no live log row left on ${key}`);
        }
      });

      if (strategy === 'lease') {
        it(`semaphore permit grant killed until its budget runs out (KILL ${kill}): typed, no permit left`, async () => {
          const key = `sem-${kill}`;
          await (await otherLocks.acquireSemaphore(key, 1)).release();
          const { value, error, killed } = await killedUntilSettled(kill, key, () => locks.acquireSemaphore(key, 1, { timeoutMs: 2_500 }));
          if (value) await value.release();
          assert.ok(killed >= 1, 'the grant was killed at least once');
          assert.ok(error instanceof DbLockError, `typed: got ${describeError(error)}`);
          assert.equal(locks.stats().held, 0, 'held back to 0');
          assert.equal(locks.stats().waiting, 0, 'waiting back to 0');
          const permit = await bounded(
            otherLocks.acquireSemaphore(key, 1, { timeoutMs: 3_000 }).catch((e: unknown) => {
              throw new Error(`the only permit was not free after the killed grant: ${describeError(e)}`);
            }),
            10_000,
            'the other permit',
          );
          await permit.release();
        });
      }
    }

    it('no connection of the apps is left after app.close()', async () => {
      await bounded(app.close(), 20_000, 'app.close()');
      await bounded(other.close(), 20_000, 'other.close()');
      let n = -1;
      await eventually(
        async () => {
          const rows = await db.query<{ n: number }[]>(
            `SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST WHERE DB = ? AND ID <> CONNECTION_ID() AND ID <> ?`,
            [db.name, blocker.threadId],
          );
          n = Number(rows[0]!.n);
          return n === 0;
        },
        3_000,
        'connections gone',
      ).catch(() => assert.fail(`${n} connection(s) of the closed apps left`));
      app = undefined as never;
      other = undefined as never;
    });
  });
});
