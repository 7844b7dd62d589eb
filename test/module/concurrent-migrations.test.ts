import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { DataSource } from 'typeorm';
import { TestDatabase, connectionSettings } from '../support/test-database.js';
import { migrationDataSource } from '../support/migration-data-source.js';

/**
 * The README's set-up runs the shipped migrations at every app start (`migrationsRun: true`); several
 * instances of an app start at once (a deployment). Each process here runs TypeORM's migration runner
 * with DB_LOCK_MIGRATIONS on the same database at the same moment; the `migrations` table already
 * exists (TypeORM's own creation race is not the library's). The library's migrations say they do
 * "only what is missing", so the tables should end up right and every process should start.
 */
const WORKER = process.env.DB_LOCK_TEST_MIGRATE_DB;

function dataSource(database: string): DataSource {
  return migrationDataSource(connectionSettings(database));
}

if (WORKER) {
  // Worker: wait for the shared start time, run the migrations, report.
  const ds = dataSource(WORKER);
  await ds.initialize();
  const startAt = Number(process.env.DB_LOCK_TEST_MIGRATE_AT);
  await new Promise((r) => setTimeout(r, Math.max(0, startAt - Date.now())));
  let outcome: { ok: boolean; error?: string; name?: string };
  try {
    await ds.runMigrations();
    outcome = { ok: true };
  } catch (error) {
    outcome = { ok: false, name: (error as Error).constructor.name, error: (error as Error).message };
  }
  await ds.destroy();
  process.stdout.write(`\n${JSON.stringify(outcome)}\n`);
  process.exit(0);
} else {
  describe('the shipped migrations run by several processes at once', () => {
    let db: TestDatabase;
    before(async () => {
      db = await TestDatabase.create('dblock', { lockTables: false });
      // TypeORM's migrations table, created once beforehand.
      const ds = new DataSource({ ...dataSource(db.name).options, migrations: [] } as never);
      await ds.initialize();
      await ds.runMigrations();
      await ds.destroy();
    });
    after(async () => {
      await db?.drop();
    });

    it('four processes running migrationsRun at the same moment on an empty database all succeed', async () => {
      const file = fileURLToPath(import.meta.url);
      const startAt = Date.now() + 2_500;
      const runs = Array.from(
        { length: 4 },
        () =>
          new Promise<string>((resolve, reject) => {
            const child = spawn(process.execPath, [file], {
              env: { ...process.env, DB_LOCK_TEST_MIGRATE_DB: db.name, DB_LOCK_TEST_MIGRATE_AT: String(startAt) },
              stdio: ['ignore', 'pipe', 'inherit'],
            });
            let out = '';
            child.stdout.on('data', (d) => (out += String(d)));
            const timer = setTimeout(() => child.kill('SIGKILL'), 40_000);
            child.on('exit', () => {
              clearTimeout(timer);
              resolve(
                out
                  .split('\n')
                  .filter((l) => l.startsWith('{"ok"'))
                  .pop() ?? '',
              );
            });
            child.on('error', reject);
          }),
      );
      const outcomes = (await Promise.all(runs)).map(
        (line) => JSON.parse(line || '{"ok":false,"error":"no answer"}') as { ok: boolean; name?: string; error?: string },
      );
      const failed = outcomes.filter((o) => !o.ok);
      assert.deepEqual(
        failed,
        [],
        `processes running the shipped migrations at the same time failed: ${failed.map((f) => `${f.name}: ${f.error}`).join(' | ')}`,
      );
      const columns = await db.query<{ n: number }[]>(
        `SELECT COUNT(*) AS n FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'db_lock_log' AND COLUMN_NAME = 'token_claim'`,
      );
      assert.equal(Number(columns[0]!.n), 1);
    });
  });
}
