import 'reflect-metadata';
import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import { LockService, WriteLock } from '../../lib/index.js';
import { createLockApp } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';
import { contractSuite } from '../support/contract-targets.js';
import { runSql } from '../support/portable-sql.js';

/**
 * Work that the locked method started but did not await, and that writes through
 * `lockService.manager` while the fenced call is ending (its fence/COMMIT, or its ROLLBACK, in
 * flight). Such a write would be queued on the fenced transaction's connection behind
 * COMMIT/ROLLBACK and run in autocommit, outside any lock (after a failed call too): it must be
 * refused, and nothing of it committed.
 */
contractSuite('fenced-decorators', 'late writes through lockService.manager while the fenced call ends', { postgres: true }, (target) => {
  let db: TestDatabase;
  let app: INestApplicationContext;
  let locks: LockService;

  before(async () => {
    db = await TestDatabase.forTarget(target);
    await db.query(`CREATE TABLE entry (id ${db.sql.autoId}, k VARCHAR(32) NOT NULL, what VARCHAR(32) NOT NULL)${db.sql.tableOptions}`);
    ({ app, locks } = await createLockApp(db.settings, target.options()));
  });
  after(async () => {
    await app?.close();
    await db?.drop();
  });

  const entries = async (k: string) => (await db.query<{ what: string }[]>('SELECT what FROM entry WHERE k = ? ORDER BY id', [k])).map((r) => r.what);

  /**
   * A text expression: `inTx` when the statement runs inside an open transaction (the fenced one
   * is fine), `autocommit` when it runs on its own. MariaDB says so in @@in_transaction.
   * PostgreSQL has no such flag: a statement on its own runs in an implicit transaction that has
   * no transaction id yet while its SELECT list is evaluated (the id comes with its first row
   * written), whereas the fenced transaction has one once the work has written ('in').
   */
  const txLabel = (inTx: string, autocommit: string) =>
    db.type === 'postgres'
      ? `CASE WHEN pg_current_xact_id_if_assigned() IS NULL THEN '${autocommit}' ELSE '${inTx}' END`
      : `IF(@@in_transaction, '${inTx}', '${autocommit}')`;

  class Probe {
    late: Promise<unknown> | undefined;
    constructor(readonly l: LockService) {}

    /** Starts a task that writes through lockService.manager right after the method settles (setImmediate). */
    private startLateWrite(k: string): void {
      this.late = new Promise((resolve) => setImmediate(resolve)).then(async () => {
        try {
          // Records whether it ran inside a transaction (see txLabel): inside the fenced one is fine.
          await runSql(this.l.manager, `INSERT INTO entry (k, what) SELECT ?, ${txLabel('late-in-tx', 'late-autocommit')}`, [k]);
          return 'written';
        } catch (error) {
          return error;
        }
      });
    }

    @WriteLock('late:{0}')
    async succeed(k: string): Promise<void> {
      await runSql(this.l.manager, 'INSERT INTO entry (k, what) VALUES (?, ?)', [k, 'in']);
      this.startLateWrite(k);
    }

    /** A common shape: two pieces of work at once with Promise.all, one fails fast while the other still writes. */
    @WriteLock('late:{0}')
    async failFast(k: string): Promise<void> {
      const slowWriter = async () => {
        await runSql(this.l.manager, db.type === 'postgres' ? 'SELECT pg_sleep(0.2)' : 'SELECT SLEEP(0.2)');
        // Its label only explains a failure: any row of it fails the test (on PostgreSQL a lease's fenced
        // transaction has written nothing yet, so even a write inside it would read 'second-autocommit').
        await runSql(this.l.manager, `INSERT INTO entry (k, what) SELECT ?, ${txLabel('second-in-tx', 'second-autocommit')}`, [k]);
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
      await runSql(this.l.manager, 'INSERT INTO entry (k, what) VALUES (?, ?)', [k, 'in']);
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
