import 'reflect-metadata';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import { LockService, WriteLock, type LockStrategyName } from '../../lib/index.js';
import { createLockApp } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';

/**
 * Work that the locked method started but did not await, and that writes through
 * `lockService.manager` while the fenced call is ending (its fence/COMMIT, or its ROLLBACK, in
 * flight). Such a write would be queued on the fenced transaction's connection behind
 * COMMIT/ROLLBACK and run in autocommit, outside any lock (after a failed call too): it must be
 * refused, and nothing of it committed.
 */
for (const strategy of ['lease', 'row-lock'] as LockStrategyName[]) {
  describe(`late writes through lockService.manager while the fenced call ends (${strategy})`, () => {
    let db: TestDatabase;
    let app: INestApplicationContext;
    let locks: LockService;

    before(async () => {
      db = await TestDatabase.create();
      await db.query('CREATE TABLE entry (id INT AUTO_INCREMENT PRIMARY KEY, k VARCHAR(32) NOT NULL, what VARCHAR(32) NOT NULL) ENGINE=InnoDB');
      ({ app, locks } = await createLockApp(db.settings, { strategy }));
    });
    after(async () => {
      await app?.close();
      await db?.drop();
    });

    const entries = async (k: string) =>
      (await db.query<{ what: string }[]>('SELECT what FROM entry WHERE k = ? ORDER BY id', [k])).map((r) => r.what);

    class Probe {
      late: Promise<unknown> | undefined;
      constructor(readonly l: LockService) {}

      /** Starts a task that writes through lockService.manager right after the method settles (setImmediate). */
      private startLateWrite(k: string): void {
        this.late = new Promise((resolve) => setImmediate(resolve)).then(async () => {
          try {
            // Records whether it ran inside a transaction (MariaDB's @@in_transaction): inside the fenced one is fine.
            await this.l.manager.query(`INSERT INTO entry (k, what) SELECT ?, IF(@@in_transaction, 'late-in-tx', 'late-autocommit')`, [k]);
            return 'written';
          } catch (error) {
            return error;
          }
        });
      }

      @WriteLock('late:{0}')
      async succeed(k: string): Promise<void> {
        await this.l.manager.query('INSERT INTO entry (k, what) VALUES (?, ?)', [k, 'in']);
        this.startLateWrite(k);
      }

      /** A common shape: two pieces of work at once with Promise.all, one fails fast while the other still writes. */
      @WriteLock('late:{0}')
      async failFast(k: string): Promise<void> {
        const slowWriter = async () => {
          await this.l.manager.query('SELECT SLEEP(0.2)');
          await this.l.manager.query(`INSERT INTO entry (k, what) SELECT ?, IF(@@in_transaction, 'second-in-tx', 'second-autocommit')`, [k]);
        };
        this.late = slowWriter().then(
          () => 'written',
          (e: unknown) => e,
        );
        const failSoon = async () => {
          await new Promise((r) => setTimeout(r, 20));
          throw new Error('validation failed');
        };
        await Promise.all([failSoon(), this.late]);
      }

      @WriteLock('late:{0}')
      async fail(k: string): Promise<void> {
        await this.l.manager.query('INSERT INTO entry (k, what) VALUES (?, ?)', [k, 'in']);
        this.startLateWrite(k);
        throw new Error('business failure');
      }
    }

    it('a write sent while the fenced call commits does not commit on its own outside the lock', async () => {
      const probe = new Probe(locks);
      await probe.succeed('c1');
      const got = await probe.late;
      const rows = await entries('c1');
      assert.ok(
        !rows.includes('late-autocommit'),
        `a write through lockService.manager sent after the method returned (while its fence/COMMIT was in flight) committed outside the lock ` +
          `in autocommit mode, after the lock was released (rows: ${JSON.stringify(rows)}; ` +
          `task answered ${got instanceof Error ? `${got.constructor.name}: ${got.message}` : String(got)})`,
      );
    });

    it('a write sent while the failed fenced call rolls back does not commit at all', async () => {
      const probe = new Probe(locks);
      await assert.rejects(probe.fail('r1'), /business failure/);
      const got = await probe.late;
      const rows = await entries('r1');
      assert.deepEqual(
        rows,
        [],
        `the call failed and was rolled back, yet a write through lockService.manager sent while the ROLLBACK was in flight committed ` +
          `(rows: ${JSON.stringify(rows)}; task answered ${got instanceof Error ? `${got.constructor.name}: ${got.message}` : String(got)})`,
      );
    });

    it("Promise.all failing fast: the sibling task's later write does not commit after the ROLLBACK", async () => {
      const probe = new Probe(locks);
      await assert.rejects(probe.failFast('p1'), /validation failed/);
      const got = await probe.late;
      const rows = await entries('p1');
      assert.deepEqual(
        rows,
        [],
        `the locked call failed (Promise.all rejected fast) and was rolled back, yet the sibling task's write through lockService.manager, ` +
          `queued behind the ROLLBACK on the fenced connection, committed (rows: ${JSON.stringify(rows)}; ` +
          `task answered ${got instanceof Error ? `${got.constructor.name}: ${got.message}` : String(got)})`,
      );
    });
  });
}
