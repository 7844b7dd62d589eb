/**
 * Development probe: what client work costs a hold, depending on where it runs. Two autocommit PK
 * UPDATEs per op on one connection, with a busy-wait of N µs either before each statement is sent
 * or right after it is sent (before its answer is awaited); the N values interleaved op by op.
 * Prints, per N, the op's median time minus the busy-waits: work before a send adds at least in
 * full, work after a send overlaps the server's and costs only what outlasts it.
 * `node build/test/bench/probe-think-time.js [ops] [µs,µs,...]`
 */
import mysql from 'mysql2/promise';
import { TestDatabase } from '../support/test-database.js';
import { runProbe } from './probe-main.js';
import { median } from './stats.js';

function busyWait(us: number): void {
  const end = performance.now() + us / 1000;
  while (performance.now() < end);
}

async function main(): Promise<void> {
  const ops = Number(process.argv[2] ?? 3000);
  const thinks = (process.argv[3] ?? '0,20,50,100,200').split(',').map(Number);
  const db = await TestDatabase.create('dblock_think');
  const conn = await mysql.createConnection({ ...db.settings });
  try {
    await conn.query('CREATE TABLE t (id INT PRIMARY KEY, v INT NOT NULL) ENGINE=InnoDB');
    await conn.query('INSERT INTO t VALUES (1, 0), (2, 0)');
    const update = (id: number) => conn.query(`UPDATE t SET v = v + 1 WHERE id = ${id}`);
    const shapes = {
      before: async (us: number) => {
        busyWait(us);
        await update(1);
        busyWait(us);
        await update(2);
      },
      after: async (us: number) => {
        const first = update(1);
        busyWait(us);
        await first;
        const second = update(2);
        busyWait(us);
        await second;
      },
    };
    const samples: Record<string, number[]> = {};
    for (let i = 0; i < ops; i++)
      for (const [where, shape] of Object.entries(shapes))
        for (const us of thinks) {
          const started = performance.now();
          await shape(us);
          const ms = performance.now() - started - (2 * us) / 1000;
          if (i < ops / 10) continue; // warm-up
          (samples[`${where} ${us}`] ??= []).push(ms);
        }
    for (const [name, xs] of Object.entries(samples))
      console.log(`work ${name.padEnd(10)} µs: op minus the work ${(median(xs) * 1000).toFixed(0)} µs`);
  } finally {
    await conn.end();
    await db.drop();
  }
}
runProbe(main);
