import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Column, Entity, PrimaryColumn, type DataSource } from 'typeorm';
import { TestDatabase } from '../support/test-database.js';
import { DB_LOCK_ENTITIES } from '../../lib/index.js';
import { migrationDataSource } from '../support/migration-data-source.js';

/** An app's own entity, beside the library's. */
@Entity({ name: 'app_order' })
class AppOrder {
  @PrimaryColumn({ type: 'int' })
  id!: number;

  @Column({ type: 'varchar', length: 40 })
  state!: string;
}

/** The lock tables' DDL as the server holds it, to compare before and after TypeORM's tools ran. */
async function lockTablesDdl(db: TestDatabase): Promise<string[]> {
  const out: string[] = [];
  for (const table of ['db_lock', 'db_lock_log', 'db_lock_process', 'db_lock_row_lock']) {
    const rows = await db.query<Record<string, string>[]>(`SHOW CREATE TABLE \`${table}\``);
    out.push(rows[0]!['Create Table']!);
  }
  return out;
}

/**
 * README (Migrations and upgrades): the lock tables come from the shipped migrations, and an app's
 * TypeORM tools keep working beside them. With DB_LOCK_ENTITIES listed next to the app's own
 * entities, on tables every migration made: the schema diff (what `migration:generate` and
 * `schema:log` compute) runs and names only the app's table, and `synchronize` creates that table
 * and leaves every lock table exactly as the migrations made it (the generated `token_claim` column
 * and its unique index included). The diff used to fail ("Table '…typeorm_metadata' doesn't
 * exist": the claim column is generated, and TypeORM reads generated columns' expressions from its
 * metadata table).
 */
describe('TypeORM schema tools beside the migrated lock tables', () => {
  let db: TestDatabase;
  let ds: DataSource;
  before(async () => {
    db = await TestDatabase.create();
    ds = migrationDataSource(db.settings, { entities: [AppOrder, ...DB_LOCK_ENTITIES], migrations: [] });
    await ds.initialize();
  });
  after(async () => {
    await ds?.destroy();
    await db?.drop();
  });

  it('the diff runs and names only the app table; synchronize leaves the lock tables as they are', async () => {
    const before = await lockTablesDdl(db);
    assert.match(before[1]!, /token_claim/, 'negative control: the migrated log table has the generated claim column');
    const diff = await ds.driver
      .createSchemaBuilder()
      .log()
      .then(
        (sql) => ({ ok: true as const, statements: sql.upQueries.map((q) => q.query) }),
        (e: Error) => ({ ok: false as const, error: e.message }),
      );
    assert.equal(diff.ok, true, `the schema diff failed: ${JSON.stringify(diff)}`);
    const statements = diff.ok ? diff.statements : [];
    assert.ok(statements.length > 0 && statements.every((sql) => sql.includes('app_order')), `the diff: ${JSON.stringify(statements)}`);
    await ds.synchronize();
    const tables = await db.query<{ n: number }[]>('SELECT COUNT(*) AS n FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?', [
      db.name,
      'app_order',
    ]);
    assert.equal(Number(tables[0]!.n), 1, 'synchronize created the app table');
    assert.deepEqual(await lockTablesDdl(db), before, 'synchronize changed a lock table');
  });
});
