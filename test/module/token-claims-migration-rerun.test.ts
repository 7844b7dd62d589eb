/**
 * Shipped migrations re-run over tables in states they may meet:
 * - AddTokenClaims is two DDL statements (ADD COLUMN token_claim, then ADD UNIQUE INDEX); MySQL/MariaDB
 *   DDL is not transactional, so a run stopped between them (the process killed, the index build
 *   failing on a lock wait or a duplicate written meanwhile) leaves the column without the index and
 *   no record of the migration in TypeORM's table. Running the migration again must finish the job
 *   ("Only what is missing", "running a migration twice changes nothing").
 * - Tables created by TypeORM's `synchronize` from DB_LOCK_ENTITIES, as versions before the entities
 *   were `synchronize: false` let apps make them (the migrations say such tables "already have the
 *   new shape"), then the migrations: they run, and the library boots with claims.
 */
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { TestDatabase } from '../support/test-database.js';
import { migrationDataSource } from '../support/migration-data-source.js';
import { bootLockApp } from '../support/boot-app.js';
import { AddTokenClaims1798156800000, DB_LOCK_ENTITIES, DB_LOCK_MIGRATIONS, DbLockModule } from '../../lib/index.js';
import { mysqlLogOf } from '../support/lock-internals.js';
import { TOKEN_CLAIM_EXPRESSION } from '../../lib/store/mysql/sql.js';

describe('migrations over half-done and synchronize-made tables', () => {
  const dbs: TestDatabase[] = [];
  after(async () => {
    for (const db of dbs) await db.drop();
  });

  it('AddTokenClaims run again after it stopped between its column and its index completes', async () => {
    const db = await TestDatabase.create('dblock', { lockTables: false });
    dbs.push(db);
    const runner = { query: (sql: string, params?: unknown[]) => db.query(sql, params) } as never;
    const all = DB_LOCK_MIGRATIONS as (new () => { up(r: unknown): Promise<void> })[];
    const at = all.indexOf(AddTokenClaims1798156800000 as never);
    for (const Migration of all.slice(0, at)) await new Migration().up(runner);
    // Its first statement landed, its second did not.
    await db.query(`ALTER TABLE db_lock_log ADD COLUMN token_claim BIGINT AS (${TOKEN_CLAIM_EXPRESSION}) VIRTUAL`);
    let error: Error | undefined;
    try {
      await new AddTokenClaims1798156800000().up(runner);
    } catch (e) {
      error = e as Error;
    }
    const [index] = await db.query<{ n: number }[]>(
      `SELECT COUNT(*) AS n FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'db_lock_log' AND INDEX_NAME = 'uq_db_lock_log_key_claim'`,
    );
    assert.equal(error, undefined, `AddTokenClaims could not be run again over its own half-done change: ${error?.message}`);
    assert.equal(Number(index!.n), 2, 'the claim index is there after the re-run');
  });

  it('tables made by synchronize from DB_LOCK_ENTITIES, then the migrations: the library boots with claims and tokens increase', async () => {
    const db = await TestDatabase.create('dblock', { lockTables: false });
    dbs.push(db);
    const ds = migrationDataSource(db.settings, { entities: DB_LOCK_ENTITIES });
    await ds.initialize();
    try {
      // The entities opt out of synchronize now: opted in again here, as older versions were.
      for (const metadata of ds.entityMetadatas) (metadata as { synchronize: boolean }).synchronize = true;
      await ds.synchronize();
      const made = await db.query<{ n: number }[]>(`SELECT COUNT(*) AS n FROM information_schema.TABLES WHERE TABLE_SCHEMA = ?`, [db.name]);
      assert.equal(Number(made[0]!.n), 4, 'synchronize made the four lock tables');
      await ds.runMigrations();
    } finally {
      await ds.destroy();
    }
    const { app, locks } = await bootLockApp(db.settings, DbLockModule.forRoot({ janitor: false }));
    try {
      assert.equal(mysqlLogOf(locks).schema.claims, true);
      const tokens: number[] = [];
      for (let i = 0; i < 3; i++) {
        const l = await locks.acquire('sync:k');
        tokens.push(l.fencingToken);
        await l.release();
      }
      const p = await locks.acquireSemaphore('sync:s', 2);
      await p.release();
      const rl = await locks.acquire('sync:k', { strategy: 'row-lock' });
      tokens.push(rl.fencingToken);
      await rl.release();
      for (let i = 1; i < tokens.length; i++) assert.ok(tokens[i]! > tokens[i - 1]!, `tokens ${tokens.join(', ')}`);
    } finally {
      await app.close();
    }
  });
});
