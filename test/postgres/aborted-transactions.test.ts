import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import type { INestApplicationContext } from '@nestjs/common';
import { DataSource } from 'typeorm';
import type { LockService } from '../../lib/index.js';
import { PgSessionTransactions } from '../../lib/store/postgres/pg-session.js';
import { TestDatabase } from '../support/test-database.js';
import { pgServerUrl, pgTestsRun } from '../support/pg-test-database.js';
import { rawSession } from '../support/raw-session.js';
import { runSql } from '../support/portable-sql.js';
import { driverCodeOf } from '../support/settled.js';
import { createLockApp, endedStatuses } from '../support/lock-app.js';

/**
 * PostgreSQL leaves a transaction aborted, not rolled back, when one of its statements fails: later
 * statements fail, and COMMIT answers ROLLBACK without an error. Two consequences checked here:
 * a deadlock inside a savepoint of the work (TypeORM's nested transaction) is not the loss of the
 * whole transaction, as it is outside one (fenced-deadlock-swallowed.test.ts): the savepoint rolls
 * back and the work goes on and commits under its lock; and a COMMIT the server answered with
 * ROLLBACK is a failure, never reported as a commit.
 */
describe('aborted transactions on PostgreSQL', { skip: (await pgTestsRun()) ? false : 'no PostgreSQL server' }, () => {
  let db: TestDatabase;
  let app: INestApplicationContext;
  let locks: LockService;
  before(async () => {
    db = await TestDatabase.create('dblock', { server: pgServerUrl() });
    await db.query('CREATE TABLE biz (id INT PRIMARY KEY, v INT)');
    ({ app, locks } = await createLockApp(db.settings, { janitor: false, escapedWrites: 'ignore' }));
  });
  after(async () => {
    await app?.close();
    await db?.drop();
  });

  it('a deadlock inside a savepoint block, rolled back to it: the lock stays, the work goes on and commits', { timeout: 30_000 }, async () => {
    await db.query('INSERT INTO biz VALUES (1, 0), (2, 0), (3, 0)');
    const lost: unknown[] = [];
    let caught: unknown;
    let blocked: Promise<unknown> | undefined;
    const other = await rawSession(db.settings);
    try {
      const result = await locks.runLocked('savepoint-deadlock', async (lock) => {
        lock.signal.addEventListener('abort', () => lost.push(lock.signal.reason));
        await runSql(locks.manager, 'UPDATE biz SET v = 1 WHERE id = 1');
        await other.begin();
        await other.query('UPDATE biz SET v = 2 WHERE id = 2');
        try {
          await locks.manager.transaction(async (m) => {
            // This statement waits first, so its own deadlock check finds the cycle: it is the victim.
            const victim = runSql(m, 'UPDATE biz SET v = 1 WHERE id = 2');
            await sleep(200);
            // The other session then waits for row 1, which this transaction keeps past the savepoint's rollback.
            blocked = other.query('UPDATE biz SET v = v + 10 WHERE id = 1').then(() => other.commit());
            await victim;
          });
        } catch (error) {
          caught = error;
        }
        await runSql(locks.manager, 'UPDATE biz SET v = 3 WHERE id = 3');
        return 'done';
      });
      await blocked;
      assert.equal(driverCodeOf(caught), '40P01', `the savepoint's statement was not the deadlock victim: ${String(caught)}`);
      assert.equal(result, 'done');
      assert.deepEqual(lost, [], 'the lock was not lost');
      const rows = await db.query<{ id: number; v: number }[]>('SELECT id, v FROM biz ORDER BY id');
      assert.deepEqual(
        rows.map((r) => [r.id, r.v]),
        [
          [1, 11],
          [2, 2],
          [3, 3],
        ],
        'the work before and after the savepoint committed (row 1: ours, then the other session added 10 once we committed)',
      );
      assert.deepEqual(await endedStatuses(db, 'savepoint-deadlock'), ['RELEASED']);
    } finally {
      await other.end();
    }
  });

  it('a COMMIT answered with ROLLBACK fails; a clean one commits (control)', { timeout: 30_000 }, async () => {
    const { host, port, user, password, database } = db.settings;
    const dataSource = new DataSource({ type: 'postgres', host, port, username: user, password, database, poolSize: 1 });
    await dataSource.initialize();
    const transactions = new PgSessionTransactions(dataSource);
    const runner = dataSource.createQueryRunner();
    try {
      await transactions.begin(runner);
      await runner.query('INSERT INTO biz VALUES (10, 1)');
      await runner.query('INSERT INTO biz VALUES (10, 1)').catch(() => undefined); // a duplicate, caught: the transaction is aborted
      await assert.rejects(
        transactions.commit(runner),
        (error: Error & { code?: string }) => error.code === '25P02' && /ROLLBACK/.test(error.message),
      );
      assert.equal(runner.isTransactionActive, false, 'the runner is out of its transaction: the server ended it');
      await transactions.begin(runner);
      await runner.query('INSERT INTO biz VALUES (11, 1)');
      await transactions.commit(runner);
      const rows = await db.query<{ id: number }[]>('SELECT id FROM biz WHERE id IN (10, 11) ORDER BY id');
      assert.deepEqual(
        rows.map((r) => r.id),
        [11],
      );
    } finally {
      await runner.release();
      await dataSource.destroy();
    }
  });
});
