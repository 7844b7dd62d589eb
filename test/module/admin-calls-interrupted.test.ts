import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import type mysql from 'mysql2/promise';
import { DbLockError, type LockService } from '../../lib/index.js';
import { createLockApp, eventually } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';
import { bounded, describeError } from '../support/settled.js';

/**
 * Admin reads (inspect, listLocks, forceRelease) whose statement the server interrupts (KILL QUERY)
 * or whose connection it cuts (KILL CONNECTION) while it waits on a table lock: the caller must get
 * one of the library's typed errors (DbLockError, the driver's error as `cause`), never the
 * library's internal LockStatementError or a raw mysql2 error, and within a bound.
 */

/** Settles `p` or fails the test after `ms`: nothing may hang. */
const outcome = (p: Promise<unknown>) =>
  p.then(
    (value) => ({ value, error: undefined as unknown }),
    (error: unknown) => ({ value: undefined, error }),
  );

describe('admin reads interrupted by the server (strategy-free: the same admin store serves both)', () => {
  const strategy = 'lease' as const;
  {
    let db: TestDatabase;
    let app: INestApplicationContext;
    let locks: LockService;
    let locker: mysql.Connection;

    before(async () => {
      db = await TestDatabase.create();
      ({ app, locks } = await createLockApp(db.settings, { strategy, janitor: false }));
      locker = await db.session();
    });
    after(async () => {
      await locker?.query('UNLOCK TABLES').catch(() => undefined);
      await app?.close();
      await db?.drop();
    });

    /** Threads of this database (not ours) waiting for a table lock on a statement matching `like`. */
    async function waitingThreads(like: string): Promise<number[]> {
      const rows = await db.query<{ ID: number }[]>(
        `SELECT ID FROM information_schema.PROCESSLIST WHERE DB = ? AND ID <> CONNECTION_ID() AND COMMAND = 'Query' ` +
          `AND INFO LIKE ? AND STATE LIKE '%lock%'`,
        [db.name, like],
      );
      return rows.map((r) => Number(r.ID));
    }

    const ops: [string, string, (locks: LockService) => Promise<unknown>][] = [
      ['inspect', '%FROM db_lock_log g%', (l) => l.inspect('admin-key')],
      ['listLocks', '%FROM db_lock_log g%', (l) => l.listLocks()],
      ['forceRelease', '%FROM db_lock_log g%', (l) => l.forceRelease('admin-key', 'probe')],
    ];

    for (const [name, like, call] of ops) {
      for (const kill of ['QUERY', 'CONNECTION'] as const) {
        it(`${name}: KILL ${kill} of its statement gives a typed DbLockError with a cause`, async () => {
          await locker.query('LOCK TABLES db_lock_log WRITE');
          let unlocked = false;
          const unlock = async () => {
            if (!unlocked) await locker.query('UNLOCK TABLES');
            unlocked = true;
          };
          try {
            const running = outcome(call(locks));
            // Kill every try (forceRelease retries interrupted statements for a few seconds).
            let done = false;
            void running.then(() => (done = true));
            const started = performance.now();
            let killed = 0;
            await eventually(async () => (await waitingThreads(like)).length > 0, 5_000, `${name} to wait on the table lock`);
            while (!done && performance.now() - started < 8_000) {
              for (const id of await waitingThreads(like))
                await db.query(`KILL ${kill} ${id}`).then(
                  () => killed++,
                  () => undefined,
                );
              await new Promise((r) => setTimeout(r, 20));
            }
            await unlock();
            const { error } = await bounded(running, 20_000, name);
            assert.ok(killed >= 1, 'the statement was killed at least once');
            assert.ok(error !== undefined, `${name} should have failed after its statement was killed ${killed} time(s)`);
            assert.ok(error instanceof DbLockError, `${name} after KILL ${kill}: expected a typed DbLockError, got ${describeError(error)}`);
            assert.ok((error as Error).cause !== undefined, `${name}: the driver's error as cause`);
          } finally {
            await unlock();
          }
          // The service still works afterwards.
          const info = await bounded(locks.inspect('admin-key'), 10_000, 'inspect afterwards');
          assert.equal(info.holders.length, 0);
        });
      }
    }
  }
});
