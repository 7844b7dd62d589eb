/**
 * Development probe: the library's client CPU per uncontended lease acquire + release with no I/O.
 * The lock pool answers every statement at once (a setImmediate, as a socket's answer would come)
 * with an OK packet, so what is timed is the library's own work, warm, in a tight loop.
 * `node build/test/bench/probe-stubbed.js [ops]` (add --cpu-prof to node for a profile).
 */
import 'reflect-metadata';
import { createLockApp } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';
import { runProbe } from './probe-main.js';
import { RUNNING_PARTS } from '../../lib/lock-service.assembly.js';

type QueryThen = (sql: string, options: unknown, parse: (result: unknown) => unknown) => Promise<unknown>;

async function main(): Promise<void> {
  const ops = Number(process.argv[2] ?? 100_000);
  const db = await TestDatabase.create('dblock_stubbed');
  const { app, locks } = await createLockApp(db.settings, { janitor: false });
  try {
    await (await locks.acquire('stub')).release(); // the key known free from here on
    const pool = (RUNNING_PARTS.get(locks)!.store.log as unknown as { pool: { queryThen: QueryThen } }).pool;
    let id = 1_000_000;
    pool.queryThen = (sql, _options, parse) =>
      new Promise((resolve) =>
        setImmediate(() => resolve(parse(sql.startsWith('INSERT') ? { insertId: ++id, affectedRows: 1 } : { affectedRows: 1 }))),
      );
    const bare = async () => void (await new Promise((resolve) => setImmediate(resolve)), await new Promise((resolve) => setImmediate(resolve)));
    for (const [name, op] of [
      ['two bare setImmediate round trips', bare],
      ['library acquire + release', async () => void (await (await locks.acquire('stub')).release())],
    ] as const) {
      for (let i = 0; i < 2000; i++) await op();
      for (let round = 0; round < 3; round++) {
        const t = performance.now();
        for (let i = 0; i < ops; i++) await op();
        console.log(`${name}: ${(((performance.now() - t) * 1000) / ops).toFixed(1)} µs per op`);
      }
    }
  } finally {
    await app.close();
    await db.drop();
  }
}

runProbe(main);
