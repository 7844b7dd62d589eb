import 'reflect-metadata';
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { TypeOrmModule } from '@nestjs/typeorm';
import pg from 'pg';
import { AddLiveHolderIndex1799366400000, DbLockModule, LockService } from '../../lib/index.js';
import { GRANT_STATEMENTS } from '../../lib/store/postgres/pg-grant-decision.sql.js';
import { LIVE_KEY_INDEX, liveKeyIndexDdl } from '../../lib/store/postgres/schema.sql.js';
import { PgTestDatabase, pgTestsRun } from '../support/pg-test-database.js';

/**
 * A grant asks who holds its key. On PostgreSQL that lookup must stay cheap however many locks
 * are held: with only the index on (lock_key, status, expires_at), once ANALYZE has seen a key's
 * long history the planner reads every live row of every key through (status, process_id) instead. The partial index of
 * live rows by key (AddLiveHolderIndex) is what the grant's own prepared statement must use; the
 * negative control drops it and sees the cost come back. (Its other gain, a hot key's history
 * since the last VACUUM no longer walked, rests on index scans marking dead entries, which a busy
 * server may delay: measured in the notes, not asserted here.)
 */
/** Buffers a grant decision may touch with the index (3 here); without it, 77. */
const BUFFERS_BOUND = 10;

describe('the live-holder index on PostgreSQL', { skip: (await pgTestsRun()) ? false : 'no PostgreSQL server' }, () => {
  let db: PgTestDatabase;
  before(async () => {
    db = await PgTestDatabase.create('dblock_pg_live');
    const dataSource = await db.dataSource();
    await dataSource.runMigrations();
    await dataSource.destroy();
  });
  after(async () => {
    await db?.drop();
  });

  /**
   * The grant decision the library prepares, for one writer of `key`, run under EXPLAIN ANALYZE in
   * a transaction rolled back: its plan, and the buffers it touched (no key row was locked first,
   * so it only decides: the lookup of live holders runs, nothing is granted).
   */
  const grantPlan = async (key: string): Promise<{ plan: string; buffers: number }> => {
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    try {
      await client.query(GRANT_STATEMENTS.sql);
      const literal = `'\\x${Buffer.from(key).toString('hex')}'::bytea`;
      await client.query('BEGIN');
      const explain = `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE db_lock_grant(ARRAY[${literal}], ARRAY['write'], 30000, 'o', 'h', NULL, 0, 0, true)`;
      const [root] = ((await client.query(explain)).rows as { 'QUERY PLAN': [{ Plan: Record<string, unknown> }] }[])[0]!['QUERY PLAN'];
      await client.query('ROLLBACK');
      const plan = JSON.stringify(root);
      return { plan, buffers: Number(root.Plan['Shared Hit Blocks'] ?? 0) + Number(root.Plan['Shared Read Blocks'] ?? 0) };
    } finally {
      await client.end();
    }
  };

  it("a hot key's grant looks up its own holders, not the 3,000 locks held on other keys, after ANALYZE", async () => {
    await db.query(
      'INSERT INTO db_lock_log (lock_key, mode, owner, holder, strategy, fencing_token, status, lease_ms, acquired_at, expires_at) ' +
        "SELECT convert_to('other:' || i, 'UTF8'), 'write', 'o', 'h', 'lease', 1, 'ACQUIRED', 30000, clock_timestamp(), clock_timestamp() + interval '30 seconds' FROM generate_series(1, 3000) i",
    );
    // The hot key's history: ended holds (written ended here, so that no dead row version is left for
    // index scans to skip or not, which a busy server may delay).
    await db.query(
      'INSERT INTO db_lock_log (lock_key, mode, owner, holder, strategy, fencing_token, status, lease_ms, acquired_at, expires_at, ended_at) ' +
        "SELECT 'hot'::bytea, 'write', 'o', 'h', 'lease', i, 'RELEASED', 30000, clock_timestamp(), clock_timestamp(), clock_timestamp() FROM generate_series(1, 2000) i",
    );
    await db.query('ANALYZE db_lock_log');
    const withIndex = await grantPlan('hot');
    assert.match(withIndex.plan, new RegExp(`"Index Name":"${LIVE_KEY_INDEX}"`), withIndex.plan);
    assert.ok(withIndex.buffers <= BUFFERS_BOUND, `the decision touched ${withIndex.buffers} buffers`);

    // Negative control: without it the same decision reads every held lock's row (through the
    // index on status), a bound this test can see broken.
    await db.query(`DROP INDEX ${LIVE_KEY_INDEX}`);
    try {
      const without = await grantPlan('hot');
      assert.ok(without.buffers > 3 * BUFFERS_BOUND, `without the index the decision touched ${without.buffers} buffers: ${without.plan}`);
    } finally {
      await db.query(liveKeyIndexDdl(false));
    }
  });

  it('a database made before it gains it in place, concurrently outside a transaction, rebuilding an invalid leftover; held locks stay held', async () => {
    @Module({ imports: [TypeOrmModule.forRoot({ ...db.options(), autoLoadEntities: true }), DbLockModule.forRoot({ janitor: false })] })
    class PgApp {}
    const app = await NestFactory.createApplicationContext(PgApp, { logger: false });
    const dataSource = await db.dataSource();
    try {
      const locks = app.get(LockService);
      const held = await locks.acquire('upgrade:held');
      await db.query(`DROP INDEX ${LIVE_KEY_INDEX}`);
      const migration = new AddLiveHolderIndex1799366400000();
      const runner = dataSource.createQueryRunner();
      try {
        await migration.up(runner); // no transaction: CREATE INDEX CONCURRENTLY
        assert.deepEqual(await indexState(), [{ valid: true }]);
        // A concurrent build that failed half-way leaves an invalid index, which IF NOT EXISTS would keep.
        await db.query(`UPDATE pg_index SET indisvalid = false WHERE indexrelid = '${LIVE_KEY_INDEX}'::regclass`);
        await migration.up(runner);
        assert.deepEqual(await indexState(), [{ valid: true }]);
        await migration.down(runner);
        assert.deepEqual(await indexState(), []);
        await runner.startTransaction();
        await migration.up(runner); // in a transaction: a plain build
        await runner.commitTransaction();
        assert.deepEqual(await indexState(), [{ valid: true }]);
      } finally {
        await runner.release();
      }
      assert.equal(held.signal.aborted, false);
      assert.deepEqual(await db.query("SELECT status FROM db_lock_log WHERE lock_key = 'upgrade:held'::bytea"), [{ status: 'ACQUIRED' }]);
      await held.release();
      assert.equal(await locks.withLock('upgrade:held', (h) => h.fencingToken), held.fencingToken + 1);
    } finally {
      await dataSource.destroy();
      await app.close();
    }
  });

  const indexState = () =>
    db.query<{ valid: boolean }>(`SELECT i.indisvalid AS valid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname = $1`, [
      LIVE_KEY_INDEX,
    ]);
});
