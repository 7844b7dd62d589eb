/**
 * Development probe: client CPU per uncontended hold, library row-lock (`withLock`, critical
 * section through `handle.manager`) against the same statements by hand on a mysql2 connection.
 * Under contention on a 2-core host the client's CPU is on the critical path of every hold.
 * The 'ablation' shapes run the library's own layers bottom-up (its store calls, the strategy, the
 * runtime), so that what each layer adds shows apart from the layers above it.
 * `node build/test/bench/probe-cpu.js [ops] [shape prefixes, comma-separated]`; shapes interleaved in
 * PROBE_ROUNDS rounds (default 5), median reported; PROBE_HEAP_PROFILE=file writes a sampled allocation
 * profile (garbage included) of 1,000 holds of the first shape; PROBE_COUNT_PROMISES=1 also counts the promises
 * one hold creates (PROBE_PROMISE_SITES=1 adds where each is created); PROBE_OPTIONS='{"escapedWrites":"ignore"}' passes module options; add --cpu-prof
 * to node for a profile.
 */
import 'reflect-metadata';
import mysql from 'mysql2/promise';
import { DataSource } from 'typeorm';
import { BEGIN_AND_TAKE, RECORD_AND_COMMIT } from '../../lib/store/mysql/session-routines.sql.js';
import { createLockApp } from '../support/lock-app.js';
import { DecoratedWork } from './designs/decorated.js';
import { TestDatabase } from '../support/test-database.js';
import { cpuOfShapes, runProbe } from './probe-main.js';
import { claimGrantShape, RELEASE_SHAPE } from './uncontended-items.js';
import type { RowLockStore } from '../../lib/store/lock-store.js';
import { resolveTargets } from '../../lib/core/lock-key.js';
import type { LockRuntime } from '../../lib/core/lock-runtime.js';
import { newWaiter } from '../../lib/core/acquire-request.js';

type RawConnection = { query(sql: string, cb: (e: unknown, r: unknown) => void): void };
const rawQuery = (connection: RawConnection, sql: string): Promise<unknown> =>
  new Promise((resolve, reject) => connection.query(sql, (e, r) => (e ? reject(e) : resolve(r))));

async function main(): Promise<void> {
  const ops = Number(process.argv[2] ?? 2000);
  const db = await TestDatabase.create('dblock_cpu');
  const app = await createLockApp(db.settings, { janitor: false, ...(process.env.PROBE_OPTIONS ? JSON.parse(process.env.PROBE_OPTIONS) : {}) });
  const dataSource = app.app.get(DataSource);
  await db.query('CREATE TABLE counter (id INT PRIMARY KEY, n INT NOT NULL)');
  await db.query('INSERT INTO counter VALUES (1, 0)');
  await db.query("INSERT INTO db_lock (lock_key, fencing_token) VALUES ('hand', 0)");
  const c = await mysql.createConnection({ ...db.settings });
  const cs = async (q: (sql: string, p?: unknown[]) => Promise<unknown>) => {
    await q('SELECT n FROM counter WHERE id = 1');
    await q('UPDATE counter SET n = n + 1 WHERE id = 1');
  };
  const decorated = new DecoratedWork(app.locks);
  const parts = (app.locks as unknown as { parts: { store: { rowLocks: RowLockStore }; runtime: LockRuntime } }).parts;
  const runtime = parts.runtime;
  const strategy = runtime.strategy('row-lock');
  const rowLocks = parts.store.rowLocks;
  const targets = resolveTargets('abl', 'write', '');
  const strategyHold = async (timeoutMs: number) => {
    const waiter = newWaiter({ targets, mode: 'write', strategy: 'row-lock', timeoutMs, leaseMs: 30_000, maxAttempts: Infinity }, performance.now());
    const { lock } = await strategy.tryGrant({ ...waiter, resolve: () => undefined, reject: () => undefined } as never);
    await lock!.transaction!.runner.manager.query('UPDATE counter SET n = n + 1 WHERE id = 1');
    await strategy.release(lock!, 'RELEASED' as never);
  };
  const times = { acquiredAt: 0, releasingAt: 0 };
  let claimedTokens = 0;
  const shapes: Record<string, () => Promise<unknown>> = {
    'row-lock @WriteLock': () => decorated.rowLock('d', (q) => q('UPDATE counter SET n = n + 1 WHERE id = 1').then(() => undefined), times),
    'lease acquire + release': async () => void (await (await app.locks.acquire('la')).release()),
    'lease @WriteLock': () => decorated.lease('dl', (q) => q('UPDATE counter SET n = n + 1 WHERE id = 1').then(() => undefined), times),
    // The lease's uncontended floor by hand: the claim INSERT and the release's PK UPDATE on a plain mysql2 connection.
    'lease by hand (claim + end)': async () => {
      const [result] = (await c.query(claimGrantShape(++claimedTokens))) as unknown as [{ insertId: number }];
      await c.query(RELEASE_SHAPE, [result.insertId]);
    },
    'plain TypeORM transaction': () => dataSource.transaction((m) => m.query('UPDATE counter SET n = n + 1 WHERE id = 1')),
    'row-lock withLock one UPDATE': () =>
      app.locks.withLock('k1', (h) => h.manager!.query('UPDATE counter SET n = n + 1 WHERE id = 1'), { strategy: 'row-lock' }),
    'empty row-lock withLock': () => app.locks.withLock('e', async () => undefined, { strategy: 'row-lock' }),
    'empty lease withLock': () => app.locks.withLock('l', async () => undefined),
    'row-lock withLock': () => app.locks.withLock('k', (h) => cs((sql, p) => h.manager!.query(sql, p)), { strategy: 'row-lock' }),
    'by hand (mysql2)': async () => {
      await c.query('START TRANSACTION');
      await c.query(
        "UPDATE db_lock SET fencing_token = LAST_INSERT_ID(fencing_token + 1), last_granted_at = UTC_TIMESTAMP(6) WHERE lock_key = 'hand'",
      );
      await cs((sql, p) => c.query(sql, p));
      await c.query(`CALL \`${RECORD_AND_COMMIT}\`('hand', 'write', UUID(), 'bench:hand', LAST_INSERT_ID(), 0, 0, 0)`);
    },
    // The row-lock decorator path's floor as the bench has it: the library's two CALLs straight on the runner's connection.
    'decorator floor (runner, CALLs)': async () => {
      const runner = dataSource.createQueryRunner();
      await runner.connect();
      try {
        const connection = (runner as unknown as { databaseConnection: RawConnection }).databaseConnection;
        (runner as unknown as { isTransactionActive: boolean }).isTransactionActive = true;
        await rawQuery(connection, `CALL \`${BEGIN_AND_TAKE}\`('hand')`);
        await runner.manager.query('UPDATE counter SET n = n + 1 WHERE id = 1');
        await rawQuery(connection, `CALL \`${RECORD_AND_COMMIT}\`('hand', 'write', UUID(), 'bench:hand', LAST_INSERT_ID(), 0, 0, 0)`);
        (runner as unknown as { isTransactionActive: boolean }).isTransactionActive = false;
      } finally {
        await runner.release();
      }
    },
    // Ablation: the library's store calls (statement text, parsing, the runner's marks) around the same UPDATE, nothing above them.
    'ablation: store calls only': async () => {
      const runner = dataSource.createQueryRunner('master');
      await runner.connect();
      try {
        const take = await rowLocks.beginAndTake(runner, targets, performance.now() + 120_000);
        if (!take.taken) throw new Error('not taken');
        await runner.manager.query('UPDATE counter SET n = n + 1 WHERE id = 1');
        await rowLocks.recordAndCommit(runner, [
          {
            key: targets[0]!.bytes,
            mode: 'write',
            owner: 'o',
            fencingToken: take.tokens.get(targets[0]!.storedKey) ?? 0,
            status: 'RELEASED',
            waitedMs: 0,
            holdMs: 0,
            note: null,
          },
        ]);
      } finally {
        await runner.release();
      }
    },
    // Ablation: the row-lock strategy's grant and commit, nothing above it (no runtime, call chain or fence).
    'ablation: strategy only': () => strategyHold(120_000),
    // The same without a wait bound: no timer on the connection wait, no time limit on the CALL.
    'ablation: strategy, no deadline': () => strategyHold(Infinity),
    // Ablation: the runtime's acquire and release around the strategy (waiter, first try, queue driver, bookkeeping, observer), no call chain or fence.
    'ablation: runtime': async () => {
      const lock = await runtime.acquire({
        targets,
        mode: 'write',
        strategy: 'row-lock',
        timeoutMs: 120_000,
        leaseMs: 30_000,
        maxAttempts: Infinity,
      });
      await lock.transaction!.runner.manager.query('UPDATE counter SET n = n + 1 WHERE id = 1');
      await runtime.release(lock, false);
    },
    'by hand (TypeORM runner)': async () => {
      const runner = dataSource.createQueryRunner();
      await runner.connect();
      try {
        await runner.startTransaction();
        await runner.query(
          "UPDATE db_lock SET fencing_token = LAST_INSERT_ID(fencing_token + 1), last_granted_at = UTC_TIMESTAMP(6) WHERE lock_key = 'hand'",
        );
        await cs((sql, p) => runner.query(sql, p));
        await runner.query(`CALL \`${RECORD_AND_COMMIT}\`('hand', 'write', UUID(), 'bench:hand', LAST_INSERT_ID(), 0, 0, 0)`);
      } finally {
        await runner.release();
      }
    },
  };
  await app.locks.withLock('abl', async () => undefined, { strategy: 'row-lock' }); // its key row
  for (const fn of Object.values(shapes)) for (let i = 0; i < 200; i++) await fn();
  // Interleaved rounds, so that drift on the host falls on every shape alike; the median round per shape.
  const chosen = Object.entries(shapes).filter(([n]) => !process.argv[3] || process.argv[3].split(',').some((p) => n.startsWith(p)));
  const rounds = Number(process.env.PROBE_ROUNDS ?? 5);
  const samples = await cpuOfShapes(chosen, ops, rounds);
  if (process.env.PROBE_COUNT_PROMISES) {
    const { createHook } = await import('node:async_hooks');
    let count = 0;
    const sites = new Map<string, number>();
    const hook = createHook({
      init: (_id, type) => {
        if (type !== 'PROMISE') return;
        count++;
        if (!process.env.PROBE_PROMISE_SITES) return;
        const lines = (new Error().stack ?? '')
          .split('\n')
          .slice(2)
          .filter((l) => !l.includes('node:internal') && !l.includes('async_hooks'));
        const site = (lines[0] ?? '?').trim().replace(/\(.*\/(build|node_modules)\//, '(');
        sites.set(site, (sites.get(site) ?? 0) + 1);
      },
    });
    for (const [name, fn] of chosen) {
      count = 0;
      hook.enable();
      for (let i = 0; i < 200; i++) await fn();
      hook.disable();
      console.log(`${name.padEnd(30)} ${(count / 200).toFixed(1)} promises/hold`);
      for (const [site, n] of [...sites].sort((a, b) => b[1] - a[1])) console.log(`  ${(n / 200).toFixed(1)} ${site}`);
      sites.clear();
    }
  }
  if (process.env.PROBE_HEAP_PROFILE) {
    // Every allocation of the first chosen shape, garbage included (sampled every 512 bytes), for where a hold's garbage comes from.
    const { Session } = await import('node:inspector/promises');
    const session = new Session();
    session.connect();
    await session.post('HeapProfiler.startSampling', {
      samplingInterval: 512,
      includeObjectsCollectedByMajorGC: true,
      includeObjectsCollectedByMinorGC: true,
    } as never);
    for (let i = 0; i < 1000; i++) await chosen[0]![1]();
    const { profile } = (await session.post('HeapProfiler.stopSampling')) as { profile: unknown };
    (await import('node:fs')).writeFileSync(process.env.PROBE_HEAP_PROFILE, JSON.stringify(profile));
    session.disconnect();
  }
  const median = (xs: number[]) => xs.sort((a, b) => a - b)[xs.length >> 1]!;
  for (const [name, s] of samples)
    console.log(
      `${name.padEnd(30)} client CPU ${median(s.map((x) => x.cpu)) | 0} µs/hold (user ${median(s.map((x) => x.user)) | 0}), wall ${median(s.map((x) => x.wall)).toFixed(3)} ms/hold (median of ${rounds} rounds)`,
    );
  await c.end();
  await app.app.close();
  await db.drop();
}

runProbe(main);
