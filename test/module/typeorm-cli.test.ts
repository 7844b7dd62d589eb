import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { serverUrl, TestDatabase } from '../support/test-database.js';

/**
 * The CLI-style data-source.ts of docs/guide/modules-and-transactions.md (test/docs/data-source.ts, which also
 * has to type-check: DB_LOCK_ENTITIES and DB_LOCK_MIGRATIONS assigned directly) run through the
 * real TypeORM CLI, as the page says: `typeorm migration:run -d <data-source>`.
 */
describe('the TypeORM CLI with DB_LOCK_ENTITIES / DB_LOCK_MIGRATIONS', () => {
  let db: TestDatabase;
  before(async () => {
    db = await TestDatabase.create('dblock_cli', { lockTables: false });
  });
  after(async () => {
    await db?.drop();
  });

  it('migration:run -d data-source.js creates the lock tables', async () => {
    const cli = createRequire(import.meta.url).resolve('typeorm/cli.js');
    const dataSource = fileURLToPath(new URL('../docs/data-source.js', import.meta.url));
    const url = serverUrl();
    url.pathname = `/${db.name}`;
    const { stdout } = await promisify(execFile)(process.execPath, [cli, 'migration:run', '-d', dataSource], {
      env: { ...process.env, DATABASE_URL: url.href },
      timeout: 120_000,
    });
    assert.match(stdout, /CreateDbLockTables1763769600000 has been executed successfully/);
    const tables = (
      await db.query<{ t: string }[]>('SELECT TABLE_NAME AS t FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? ORDER BY 1', [db.name])
    ).map((r) => r.t);
    assert.deepEqual(tables, ['db_lock', 'db_lock_log', 'db_lock_process', 'db_lock_row_lock', 'migrations']);
  });
});
