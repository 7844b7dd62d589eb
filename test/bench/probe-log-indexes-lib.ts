/**
 * Development probe: the library's uncontended acquire + release on a log table with and without
 * one secondary index, two apps on two databases, interleaved.
 * `PROBE_DROP='DROP INDEX idx_db_lock_log_acquired' node build/test/bench/probe-log-indexes-lib.js [ops] [rounds]`
 */
import 'reflect-metadata';
import mysql from 'mysql2/promise';
import { createLockApp } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';
import { printAgainst, runProbe, timeShapes } from './probe-main.js';

async function main(): Promise<void> {
  const ops = Number(process.argv[2] ?? 1000);
  const rounds = Number(process.argv[3] ?? 3);
  const dbA = await TestDatabase.create('dblock_idx_a');
  const dbB = await TestDatabase.create('dblock_idx_b');
  const appA = await createLockApp(dbA.settings, { janitor: false });
  const appB = await createLockApp(dbB.settings, { janitor: false });
  for (const change of (process.env.PROBE_DROP ?? 'DROP INDEX idx_db_lock_log_acquired').split(';'))
    await dbB.query(`ALTER TABLE db_lock_log ${change}`);
  const c = await mysql.createConnection({ ...dbA.settings });
  await c.query('CREATE TABLE pk (id INT PRIMARY KEY, v INT) ENGINE=InnoDB');
  await c.query('INSERT INTO pk VALUES (1, 0), (2, 0)');
  const shapes: Record<string, () => Promise<unknown>> = {
    'two pk updates': async () => {
      await c.query('UPDATE pk SET v = v + 1 WHERE id = 1');
      await c.query('UPDATE pk SET v = v + 1 WHERE id = 2');
    },
    'library, full table': async () => void (await (await appA.locks.acquire('lib')).release()),
    'library, changed table': async () => void (await (await appB.locks.acquire('lib')).release()),
  };
  for (const fn of Object.values(shapes)) for (let i = 0; i < 50; i++) await fn();
  printAgainst(await timeShapes(shapes, ops, { rounds, block: 10 }), 'two pk updates');
  await c.end();
  await appA.app.close();
  await appB.app.close();
  await dbA.drop();
  await dbB.drop();
}

runProbe(main);
