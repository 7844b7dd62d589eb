import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { DataSource } from 'typeorm';
import { TestDatabase } from '../support/test-database.js';
import { migrationDataSource } from '../support/migration-data-source.js';
import { bootLockApp } from '../support/boot-app.js';
import { DB_LOCK_MIGRATIONS, DbLockModule } from '../../lib/index.js';
import { mysqlLogOf } from '../support/lock-internals.js';

/**
 * The shipped migrations through TypeORM's own runner: up, every one but the first down, up again,
 * and the library then boots, with claims, and a key's tokens continue above every token handed out.
 */
describe('shipped migrations: up, down, up again', () => {
  let db: TestDatabase;
  let ds: DataSource;
  before(async () => {
    db = await TestDatabase.create('dblock', { lockTables: false });
    ds = migrationDataSource(db.settings);
    await ds.initialize();
  });
  after(async () => {
    await ds?.destroy();
    await db?.drop();
  });

  it('tokens continue across down and up of every migration after the first', async () => {
    await ds.runMigrations({ transaction: 'none' });
    const tokens: number[] = [];
    const use = async () => {
      const { app, locks } = await bootLockApp(db.settings, DbLockModule.forRoot({ janitor: false }));
      try {
        assert.equal(mysqlLogOf(locks).schema.claims, true);
        for (let i = 0; i < 3; i++) {
          const lock = await locks.acquire('cyc:k');
          tokens.push(lock.fencingToken);
          await lock.release();
        }
        const permit = await locks.acquireSemaphore('cyc:s', 2);
        await permit.release();
        // A key a lease held, then a row-lock: the take claims its token (a CLAIMED row), then its audit row.
        const lease = await locks.acquire('cyc:m');
        await lease.release();
        const rl = await locks.acquire('cyc:m', { strategy: 'row-lock' });
        await rl.release();
      } finally {
        await app.close();
      }
    };
    await use();
    for (let round = 0; round < 2; round++) {
      for (let i = 1; i < DB_LOCK_MIGRATIONS.length; i++) await ds.undoLastMigration({ transaction: 'none' });
      const [row] = await db.query<{ t: string }[]>(`SELECT fencing_token AS t FROM db_lock WHERE lock_key = 'cyc:k'`);
      assert.ok(Number(row!.t) >= tokens[tokens.length - 1]!, `round ${round}: key row ${row!.t} covers the tokens handed out (${tokens.join(',')})`);
      const rows = await db.query(`SELECT fencing_token, status FROM db_lock_log WHERE lock_key = 'cyc:m' ORDER BY id`);
      await assert.doesNotReject(ds.runMigrations({ transaction: 'none' }), `round ${round}: up again; cyc:m log rows ${JSON.stringify(rows)}`);
      await use();
    }
    for (let i = 1; i < tokens.length; i++) assert.ok(tokens[i]! > tokens[i - 1]!, `tokens strictly increasing: ${tokens.join(', ')}`);
  });
});
