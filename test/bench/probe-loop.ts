/**
 * Development probe: the library's uncontended acquire + release loop, for `node --cpu-prof`
 * (client work per op) and its wall time next to two autocommit PK UPDATEs, interleaved.
 */
import 'reflect-metadata';
import mysql from 'mysql2/promise';
import { createLockApp } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';
import { runProbe } from './probe-main.js';

async function main(): Promise<void> {
  const db = await TestDatabase.create('dblock_loop');
  const { app, locks } = await createLockApp(db.settings, { janitor: false } as never);
  const c = await mysql.createConnection({ ...db.settings });
  await c.query('CREATE TABLE pk (id INT PRIMARY KEY, v INT)');
  await c.query('INSERT INTO pk VALUES (1, 0)');
  const ops = Number(process.argv[2] ?? 1000);
  const mode = process.argv[3] ?? 'write';
  const lib: number[] = [];
  const floor: number[] = [];
  for (let i = 0; i < 50; i++) await (await locks.acquire('probe:k', { mode: mode as 'write' })).release();
  for (let i = 0; i < ops; i++) {
    let t = performance.now();
    const lock = await locks.acquire('probe:k', { mode: mode as 'write' });
    await lock.release();
    lib.push(performance.now() - t);
    t = performance.now();
    await c.query('UPDATE pk SET v = v + 1 WHERE id = 1');
    await c.query('UPDATE pk SET v = v + 1 WHERE id = 1');
    floor.push(performance.now() - t);
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  console.log(
    `lease ${mode} acquire + release ${median(lib).toFixed(3)} ms; two PK updates ${median(floor).toFixed(3)} ms; ratio ${(median(lib) / median(floor)).toFixed(2)}`,
  );
  await c.end();
  await app.close();
  await db.drop();
}

runProbe(main);
