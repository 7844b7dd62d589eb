import 'reflect-metadata';
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { TypeOrmModule } from '@nestjs/typeorm';
import { DB_LOCK_MIGRATIONS, DbLockModule, LockEntity, LockLogEntity, LockService } from '../../lib/index.js';
import { PgTestDatabase, pgTestsRun } from '../support/pg-test-database.js';

/**
 * The lock tables on PostgreSQL: the shipped migrations create them (the first one all at once,
 * the later MySQL steps change nothing there), in parallel instances too, and revert them; the
 * entities pass TypeORM's metadata check on a PostgreSQL DataSource.
 */
describe('PostgreSQL schema', { skip: (await pgTestsRun()) ? false : 'no PostgreSQL server answers and DB_LOCK_TEST_PG_URL is unset' }, () => {
  let db: PgTestDatabase;
  before(async () => {
    db = await PgTestDatabase.create('dblock_pg_schema');
  });
  after(async () => {
    await db.drop();
  });

  const columnsOf = async (table: string) =>
    Object.fromEntries(
      (
        await db.query<{ column_name: string; data_type: string; is_nullable: string }>(
          'SELECT column_name, data_type, is_nullable FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = $1',
          [table],
        )
      ).map((c) => [c.column_name, `${c.data_type}${c.is_nullable === 'YES' ? ' null' : ''}`]),
    );
  const lockTables = async () =>
    (
      await db.query<{ table_name: string }>(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_name LIKE 'db\\_lock%' ORDER BY 1",
      )
    ).map((t) => t.table_name);

  it('two instances migrating at once both succeed and create the tables once, in their final shape', async () => {
    // The app's own migration after the library's keeps the first instance's transaction open a
    // while: the second one's CREATE … IF NOT EXISTS then meets tables created but not committed
    // (without the library's lock it fails on the catalog's unique index, 23505).
    const migrations = [...DB_LOCK_MIGRATIONS, AppMigration1800000000000];
    const [one, two] = await Promise.all([db.dataSource({ migrations }), db.dataSource({ migrations })]);
    // TypeORM's migrations table, created once beforehand (TypeORM's own creation race is not the library's).
    await one.showMigrations();
    const ran = await Promise.all([one.runMigrations(), two.runMigrations()]);
    assert.ok(ran.every((list) => Array.isArray(list)));
    assert.deepEqual(await lockTables(), ['db_lock', 'db_lock_log', 'db_lock_process', 'db_lock_row_lock']);
    assert.deepEqual(await columnsOf('db_lock'), {
      lock_key: 'bytea',
      fencing_token: 'bigint',
      writer_waiting_until: 'timestamp with time zone null',
      last_granted_at: 'timestamp with time zone null',
      semaphore_limit: 'integer null',
      no_lease_holders: 'smallint',
    });
    const log = await columnsOf('db_lock_log');
    assert.equal(log.lock_key, 'bytea');
    assert.equal(log.acquired_at, 'timestamp with time zone');
    assert.equal(log.ended_at, 'timestamp with time zone null');
    assert.deepEqual(Object.keys(log).sort(), Object.keys(await columnsOfEntity(LockLogEntity)).sort());
    const indexes = (await db.query<{ indexname: string }>("SELECT indexname FROM pg_indexes WHERE tablename = 'db_lock_log' ORDER BY 1")).map(
      (i) => i.indexname,
    );
    assert.deepEqual(indexes, [
      'db_lock_log_pkey',
      'idx_db_lock_log_key_status',
      'idx_db_lock_log_live_key',
      'idx_db_lock_log_status_process',
      'uq_db_lock_log_key_claim',
    ]);
  });

  it('keys are exact bytes, at most 764 of them', async () => {
    const keys = ['k', 'K', 'k ', 'k\u0000'].map((k) => Buffer.from(k));
    for (const key of keys) await db.query('INSERT INTO db_lock (lock_key) VALUES ($1)', [key]);
    const stored = await db.query<{ lock_key: Buffer }>("SELECT lock_key FROM db_lock WHERE lock_key IN ('\\x6b', '\\x4b', '\\x6b20', '\\x6b00')");
    assert.equal(stored.length, 4);
    await db.query('INSERT INTO db_lock (lock_key) VALUES ($1)', [Buffer.alloc(764, 1)]);
    await assert.rejects(db.query('INSERT INTO db_lock (lock_key) VALUES ($1)', [Buffer.alloc(765, 1)]), { code: '23514' });
    await db.query('DELETE FROM db_lock');
  });

  it("a key's token is claimed once by lease-side rows; row-lock audit rows may share one", async () => {
    const row = (strategy: string, status: string) =>
      db.query(
        'INSERT INTO db_lock_log (lock_key, mode, owner, holder, fencing_token, status, lease_ms, acquired_at, expires_at, strategy) ' +
          "VALUES ('\\x6b', 'write', '00000000-0000-0000-0000-000000000000', 'test', 7, $1, 0, clock_timestamp(), clock_timestamp(), $2)",
        [status, strategy],
      );
    await row('lease', 'ACQUIRED');
    await assert.rejects(row('lease', 'RELEASED'), { code: '23505' });
    await assert.rejects(row('row-lock', 'CLAIMED'), { code: '23505' });
    await row('row-lock', 'RELEASED');
    await row('row-lock', 'FAILED');
    await db.query('DELETE FROM db_lock_log');
  });

  it('the entities read the tables: Buffer keys, Date times', async () => {
    const dataSource = await db.dataSource();
    await dataSource.query("INSERT INTO db_lock (lock_key, last_granted_at) VALUES ('\\x006b20', clock_timestamp())");
    const [row] = await dataSource.getRepository(LockEntity).find();
    assert.ok(Buffer.isBuffer(row?.key));
    assert.deepEqual(row.key, Buffer.from([0, 0x6b, 0x20]));
    assert.ok(row.lastGrantedAt instanceof Date);
    await dataSource.query('DELETE FROM db_lock');
  });

  it('DbLockModule with its defaults (the lease strategy) starts on the migrated tables and grants', async () => {
    @Module({ imports: [TypeOrmModule.forRoot({ ...db.options(), autoLoadEntities: true }), DbLockModule.forRoot()] })
    class PgApp {}
    const app = await NestFactory.createApplicationContext(PgApp, { logger: false, abortOnError: false });
    try {
      const token = await app.get(LockService).withLock('defaults', async (handle) => handle.fencingToken);
      assert.equal(token, 1);
      assert.deepEqual(await db.query("SELECT strategy, status FROM db_lock_log WHERE lock_key = 'defaults'::bytea"), [
        { strategy: 'lease', status: 'RELEASED' },
      ]);
    } finally {
      await app.close();
    }
  });

  it('every migration reverts in turn, the first one dropping the tables', async () => {
    const dataSource = await db.dataSource({ migrations: [...DB_LOCK_MIGRATIONS, AppMigration1800000000000] });
    for (let i = 0; i <= DB_LOCK_MIGRATIONS.length; i++) await dataSource.undoLastMigration();
    assert.deepEqual(await lockTables(), []);
    assert.deepEqual(await dataSource.query('SELECT name FROM migrations'), []);
  });
});

/** An app's migration run after the library's, in the same transaction: it takes a while. */
class AppMigration1800000000000 {
  name = 'AppMigration1800000000000';
  async up(queryRunner: { query(sql: string): Promise<unknown> }): Promise<void> {
    await queryRunner.query('SELECT pg_sleep(0.3)');
  }
  async down(): Promise<void> {}
}

/** The column names the entity declares. */
async function columnsOfEntity(entity: Function): Promise<Record<string, true>> {
  const { getMetadataArgsStorage } = await import('typeorm');
  return Object.fromEntries(
    getMetadataArgsStorage()
      .filterColumns(entity)
      .map((c) => [c.options.name ?? c.propertyName, true]),
  );
}
