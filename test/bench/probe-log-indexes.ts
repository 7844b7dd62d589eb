/**
 * Development probe: what each secondary index of `db_lock_log` costs the claim grant's INSERT and
 * the release's UPDATE. Copies of the table with indexes dropped, the claim floor by hand on each.
 * `node build/test/bench/probe-log-indexes.js [ops] [rounds]`
 */
import 'reflect-metadata';
import mysql from 'mysql2/promise';
import { createLockApp } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';
import { printAgainst, runProbe, timeShapes } from './probe-main.js';

const COLUMNS = 'lock_key, mode, owner, holder, strategy, fencing_token, status, lease_ms, acquired_at, expires_at, wait_ms, process_id';

async function main(): Promise<void> {
  const ops = Number(process.argv[2] ?? 1000);
  const rounds = Number(process.argv[3] ?? 3);
  const db = await TestDatabase.create('dblock_log_indexes');
  const app = await createLockApp(db.settings, { janitor: false });
  const c = await mysql.createConnection({ ...db.settings });
  await c.query('CREATE TABLE pk (id INT PRIMARY KEY, v INT) ENGINE=InnoDB');
  await c.query('INSERT INTO pk VALUES (1, 0), (2, 0)');
  const variants: Record<string, string[]> = {
    full: [],
    'one status index (status, lock_key, expires_at, process_id)': [
      'DROP INDEX idx_db_lock_log_status_process',
      'DROP INDEX idx_db_lock_log_key_status',
      'ADD INDEX s (status, lock_key, expires_at, process_id)',
    ],
    'no status_process': ['DROP INDEX idx_db_lock_log_status_process'],
    'claim only': ['DROP INDEX idx_db_lock_log_status_process', 'DROP INDEX idx_db_lock_log_key_status'],
  };
  const tokens: Record<string, number> = {};
  const shapes: Record<string, () => Promise<unknown>> = {
    'two pk updates': async () => {
      await c.query('UPDATE pk SET v = v + 1 WHERE id = 1');
      await c.query('UPDATE pk SET v = v + 1 WHERE id = 2');
    },
  };
  let n = 0;
  for (const [name, drop] of Object.entries(variants)) {
    const table = `log_${n++}`;
    await c.query(`CREATE TABLE ${table} LIKE db_lock_log`);
    for (const change of drop) await c.query(`ALTER TABLE ${table} ${change}`);
    shapes[name] = async () => {
      const token = (tokens[table] = (tokens[table] ?? 0) + 1);
      const [ok] = (await c.query(
        `INSERT INTO ${table} (${COLUMNS}) VALUES (X'61', 'write', '500947a2-43c6-443f-a140-363048cc2e70', 'vm:5007', 'lease', ${token}, 'ACQUIRED', 30000, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL 30000000 MICROSECOND, 0, '1')`,
      )) as unknown as [{ insertId: number }];
      await c.query(
        `UPDATE ${table} FORCE INDEX (PRIMARY) SET status = 'RELEASED', ended_at = UTC_TIMESTAMP(6), hold_ms = 0 WHERE id = ${ok.insertId} AND status IN ('ACQUIRED', 'COMPLETED')`,
      );
    };
  }
  for (const fn of Object.values(shapes)) for (let i = 0; i < 20; i++) await fn();
  printAgainst(await timeShapes(shapes, ops, { rounds, block: 10 }), 'two pk updates');
  await c.end();
  await app.app.close();
  await db.drop();
}

runProbe(main);
