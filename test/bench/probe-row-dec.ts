/**
 * Development probe: the row-lock decorator path against its floor, interleaved op by op: a plain
 * TypeORM transaction with one UPDATE; the floor (the hold's statements sent straight to a TypeORM
 * runner's connection, the UPDATE through the runner); `@WriteLock(…, { strategy: 'row-lock' })`;
 * and `withLock` with the UPDATE through `handle.manager`. Prints wall (median of round medians)
 * and client CPU per op. PROBE_ONLY=<shape> runs one shape (for --cpu-prof).
 * `node build/test/bench/probe-row-dec.js [ops per round] [rounds]`
 */
import 'reflect-metadata';
import { DataSource } from 'typeorm';
import { BEGIN_AND_TAKE, RECORD_AND_COMMIT } from '../../lib/store/mysql/session-routines.sql.js';
import { createLockApp } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';
import { DecoratedWork } from './designs/decorated.js';
import type { Body } from './designs/types.js';
import { runProbe } from './probe-main.js';

const UPDATE = 'UPDATE bench_counter SET v = v + 1 WHERE id = 3';
const rawQuery = (connection: unknown, sql: string): Promise<unknown> =>
  new Promise((resolve, reject) =>
    (connection as { query(sql: string, cb: (e: unknown, r: unknown) => void): void }).query(sql, (e, r) => (e ? reject(e) : resolve(r))),
  );

async function main(): Promise<void> {
  const ops = Number(process.argv[2] ?? 300);
  const rounds = Number(process.argv[3] ?? 7);
  const db = await TestDatabase.create('dblock_rowdec');
  const { app, locks } = await createLockApp(db.settings, { janitor: false });
  const ds = app.get(DataSource);
  await ds.query('CREATE TABLE bench_counter (id INT PRIMARY KEY, v BIGINT NOT NULL)');
  await ds.query('INSERT INTO bench_counter VALUES (3, 0)');
  await ds.query("INSERT INTO db_lock (lock_key, fencing_token) VALUES ('floor-k', 0)");
  const work = new DecoratedWork(locks);
  const oneUpdate: Body = async (query) => void (await query(UPDATE));
  const times = () => ({ acquiredAt: 0, releasingAt: 0 });
  const shapes: Record<string, () => Promise<unknown>> = {
    plain: () => ds.transaction(async (m) => void (await m.query(UPDATE))),
    floor: async () => {
      const runner = ds.createQueryRunner();
      await runner.connect();
      try {
        const connection = (runner as unknown as { databaseConnection: unknown }).databaseConnection;
        (runner as unknown as { isTransactionActive: boolean }).isTransactionActive = true;
        await rawQuery(connection, `CALL \`${BEGIN_AND_TAKE}\`('floor-k')`);
        await runner.manager.query(UPDATE);
        await rawQuery(connection, `CALL \`${RECORD_AND_COMMIT}\`('floor-k', 'write', UUID(), 'f', LAST_INSERT_ID(), 0, 0, 0)`);
        (runner as unknown as { isTransactionActive: boolean }).isTransactionActive = false;
      } finally {
        if (runner.isTransactionActive) await runner.rollbackTransaction();
        await runner.release();
      }
    },
    decorated: () => work.rowLock('dec-k', oneUpdate, times()),
    withLock: () => locks.withLock('wl-k', async (h) => void (await h.manager!.query(UPDATE)), { strategy: 'row-lock' }),
  };
  if (process.env.PROBE_ONLY) for (const name of Object.keys(shapes)) if (name !== process.env.PROBE_ONLY) delete shapes[name];
  const results: Record<string, number[]> = {};
  const cpu: Record<string, number> = {};
  const count: Record<string, number> = {};
  for (let r = -1; r < rounds; r++) {
    const samples: Record<string, number[]> = {};
    for (let i = 0; i < ops; i++)
      for (const [name, fn] of Object.entries(shapes)) {
        const c0 = process.cpuUsage();
        const t0 = performance.now();
        await fn();
        (samples[name] ??= []).push(performance.now() - t0);
        const cu = process.cpuUsage(c0);
        if (r >= 0) {
          cpu[name] = (cpu[name] ?? 0) + cu.user + cu.system;
          count[name] = (count[name] ?? 0) + 1;
        }
      }
    if (r < 0) continue;
    for (const [name, xs] of Object.entries(samples)) (results[name] ??= []).push(xs.sort((a, b) => a - b)[xs.length >> 1]!);
  }
  const base = results.plain ?? Object.values(results)[0]!;
  for (const [name, xs] of Object.entries(results)) {
    const ratios = xs.map((x, i) => x / base[i]!).sort((a, b) => a - b);
    const m = xs.slice().sort((a, b) => a - b)[rounds >> 1]!;
    console.log(
      `${name.padEnd(10)} ${(m * 1000).toFixed(0)} µs, × plain ${ratios[rounds >> 1]!.toFixed(3)} (${ratios[0]!.toFixed(3)}–${ratios[rounds - 1]!.toFixed(3)}), CPU ${(cpu[name]! / count[name]!).toFixed(0)} µs/op`,
    );
  }
  await app.close();
  await db.drop();
}
runProbe(main);
