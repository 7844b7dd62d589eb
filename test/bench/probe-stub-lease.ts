/**
 * Development probe: the library's own client work per uncontended lease acquire + release, with
 * the lock pool's statement answered at once (no database round trip), so that only the
 * library's JavaScript is timed. `node build/test/bench/probe-stub-lease.js [ops]`; add
 * --cpu-prof to node for a profile of it.
 */
import 'reflect-metadata';
import { createLockApp } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';
import { runProbe } from './probe-main.js';
import { RUNNING_PARTS } from '../../lib/lock-service.assembly.js';

async function main(): Promise<void> {
  const ops = Number(process.argv[2] ?? 20000);
  const db = await TestDatabase.create('dblock_stub');
  const app = await createLockApp(db.settings, { janitor: false });
  const pool = (RUNNING_PARTS.get(app.locks)!.store as unknown as { log: { pool: Record<string, unknown> } }).log.pool;
  const first = await app.locks.acquire('s');
  await first.release(); // the key known free from here on: the claim grant
  let id = 1_000_000;
  pool.queryThen = (_sql: string, _options: unknown, parse: (r: unknown) => unknown) =>
    new Promise((resolve) => resolve(parse({ insertId: ++id, affectedRows: 1 })));
  const one = async () => void (await (await app.locks.acquire('s')).release());
  for (let i = 0; i < 2000; i++) await one();
  for (let round = 0; round < 5; round++) {
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    for (let i = 0; i < ops; i++) await one();
    const wall = performance.now() - t0;
    const cpu = process.cpuUsage(cpu0);
    console.log(`round ${round}: ${((wall * 1000) / ops).toFixed(1)} µs/op wall, ${((cpu.user + cpu.system) / ops).toFixed(1)} µs/op CPU`);
  }
  await app.app.close();
  await db.drop();
}

runProbe(main);
