import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { DataSource } from 'typeorm';
import { TestDatabase } from '../support/test-database.js';
import { DB_LOCK_ENTITIES, DB_LOCK_MIGRATIONS } from '../../lib/index.js';

/**
 * README (Schema): the tables come from the shipped migrations, and TypeORM's own tools keep
 * working beside them. After every migration ran, TypeORM's schema diff of the library's entities
 * (what `migration:generate`, `schema:log` and `synchronize` compute) must run. Today it fails: the
 * `token_claim` column is generated, and TypeORM reads the metadata of generated columns from its
 * `typeorm_metadata` table, which no migration creates.
 */
describe('TypeORM schema diff on the migrated tables', () => {
  let db: TestDatabase;
  let ds: DataSource;
  before(async () => {
    db = await TestDatabase.create('dblock', { lockTables: false });
    const s = db.settings;
    ds = new DataSource({
      type: 'mariadb',
      host: s.host,
      port: s.port,
      username: s.user,
      password: s.password,
      database: s.database,
      entities: DB_LOCK_ENTITIES,
      migrations: DB_LOCK_MIGRATIONS,
      logging: false,
    });
    await ds.initialize();
    await ds.runMigrations({ transaction: 'none' });
  });
  after(async () => {
    await ds?.destroy();
    await db?.drop();
  });

  it(
    'the schema diff runs after every shipped migration',
    { todo: "known bug, not fixed yet: TypeORM's schema diff fails on the generated token_claim column (see docs/notes/open-defects.md)" },
    async () => {
      const diff = await ds.driver
        .createSchemaBuilder()
        .log()
        .then(
          (sql) => ({ ok: true as const, statements: sql.upQueries.map((q) => q.query) }),
          (e: Error) => ({ ok: false as const, error: e.message }),
        );
      assert.equal(diff.ok, true, `the schema diff failed: ${JSON.stringify(diff)}`);
    },
  );
});
