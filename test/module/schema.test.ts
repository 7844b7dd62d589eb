import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { TestDatabase } from '../support/test-database.js';
import { bootLockApp } from '../support/boot-app.js';
import {
  AddProcessLeasesAndRowLocks1795392000000,
  AddRowLockFastPath1796342400000,
  AddSemaphores1795996800000,
  CreateDbLockTables1763769600000,
  DbLockModule,
  DbLockSchemaError,
} from '../../lib/index.js';

/**
 * Bootstrapping against a database without the lock tables (or with an older shape of them)
 * fails fast with DbLockSchemaError naming the migration to run; after running it, it boots.
 */
const FAIL_FAST_MS = 5_000;

describe('missing lock tables', () => {
  let db: TestDatabase;
  before(async () => {
    db = await TestDatabase.create();
  });
  after(async () => {
    await db?.drop();
  });

  async function expectSchemaError(): Promise<void> {
    const started = performance.now();
    await assert.rejects(bootLockApp(db.settings, DbLockModule.forRoot(), { logger: false }), (error: unknown) => {
      assert.ok(error instanceof DbLockSchemaError, `expected DbLockSchemaError, got ${String(error)}`);
      assert.equal(error.name, 'DbLockSchemaError');
      assert.match(error.message, /CreateDbLockTables1763769600000/);
      assert.match(error.message, /AddProcessLeasesAndRowLocks1795392000000/);
      assert.match(error.message, /AddSemaphores1795996800000/);
      assert.match(error.message, /AddRowLockFastPath1796342400000/);
      assert.ok(error.cause, 'the database error is kept as cause');
      return true;
    });
    assert.ok(performance.now() - started < FAIL_FAST_MS, 'bootstrap did not fail fast');
  }

  it('no tables at all', async () => {
    await db.query('DROP TABLE db_lock_row_lock');
    await db.query('DROP TABLE db_lock_process');
    await db.query('DROP TABLE db_lock_log');
    await db.query('DROP TABLE db_lock');
    await expectSchemaError();
  });

  it('only the log table missing', async () => {
    await new CreateDbLockTables1763769600000().up({ query: (sql: string, params?: unknown[]) => db.query(sql, params) } as never);
    await db.query('DROP TABLE db_lock_log');
    await expectSchemaError();
  });

  it('a column missing (older schema)', async () => {
    await new CreateDbLockTables1763769600000().up({ query: (sql: string, params?: unknown[]) => db.query(sql, params) } as never);
    await db.query('ALTER TABLE db_lock DROP COLUMN writer_waiting_until');
    await expectSchemaError();
    await db.query('ALTER TABLE db_lock ADD COLUMN writer_waiting_until DATETIME(6) NULL');
  });

  it('only the first migration ran (an upgrade without the new migration)', async () => {
    await db.query('DROP TABLE IF EXISTS db_lock_log');
    await db.query('DROP TABLE IF EXISTS db_lock');
    await new CreateDbLockTables1763769600000().up({ query: (sql: string, params?: unknown[]) => db.query(sql, params) } as never);
    await expectSchemaError();
  });

  it('the first two migrations only (an upgrade without the semaphore migration)', async () => {
    await new AddProcessLeasesAndRowLocks1795392000000().up({ query: (sql: string, params?: unknown[]) => db.query(sql, params) } as never);
    await expectSchemaError();
  });

  it('the first three migrations only (an upgrade without the row-lock fast-path migration)', async () => {
    const runner = { query: (sql: string, params?: unknown[]) => db.query(sql, params) } as never;
    await db.query(`INSERT INTO db_lock (lock_key, fencing_token) VALUES ('kept', 41)`);
    await new AddSemaphores1795996800000().up(runner);
    await new AddSemaphores1795996800000().up(runner); // idempotent: only what is missing
    await expectSchemaError();
  });

  it("boots once the migrations ran (each one upgrades the previous one's tables in place)", async () => {
    const runner = { query: (sql: string, params?: unknown[]) => db.query(sql, params) } as never;
    await new AddRowLockFastPath1796342400000().up(runner);
    await new AddRowLockFastPath1796342400000().up(runner); // idempotent: only what is missing
    const [mode] = await db.query<{ type: string }[]>(
      `SELECT COLUMN_TYPE AS type FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'db_lock_log' AND COLUMN_NAME = 'mode'`,
    );
    assert.equal(String(mode!.type).toLowerCase(), 'varchar(6)');
    const { app, locks } = await bootLockApp(db.settings, DbLockModule.forRoot());
    try {
      const lock = await locks.acquire('after-migration', { timeoutMs: 0 });
      await lock.release();
      // A permit's mode fits the widened column; the row kept across the upgrade keeps its token.
      const permit = await locks.acquireSemaphore('kept', 2, { timeoutMs: 0 });
      assert.equal(permit.fencingToken, 42);
      await permit.release();
      const [key] = await db.query<{ semaphore_limit: number; no_lease_holders: number }[]>(
        `SELECT semaphore_limit, no_lease_holders FROM db_lock WHERE lock_key = 'kept'`,
      );
      assert.equal(Number(key!.semaphore_limit), 2);
      assert.equal(Number(key!.no_lease_holders), 0, 'a lease grant closes the row-lock one-UPDATE path');
      // A row kept across the upgrade starts with 0: the first row-lock reads the log, then opens the path.
      await locks.withLock('kept', () => undefined, { strategy: 'row-lock' });
      const [after] = await db.query<{ fencing_token: string; no_lease_holders: number }[]>(
        `SELECT fencing_token, no_lease_holders FROM db_lock WHERE lock_key = 'kept'`,
      );
      assert.deepEqual([Number(after!.fencing_token), Number(after!.no_lease_holders)], [43, 1]);
    } finally {
      await app.close();
    }
  });
});
