/**
 * `npm run bench`: measures this library against the floors and the peers users would pick
 * instead, on loopback, and writes docs/benchmarks.md. BENCH_QUICK=1 for a short indicative run;
 * see config.ts for the other knobs. Needs MariaDB/MySQL (DB_LOCK_TEST_URL, default
 * mysql://root@127.0.0.1:3306) and Redis (BENCH_REDIS_URL, default redis://127.0.0.1:6379).
 */
import 'reflect-metadata';
import { mkdirSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { dirname } from 'node:path';
import { Redis } from 'ioredis';
import mysql from 'mysql2/promise';
import { DataSource } from 'typeorm';
import { createLockApp } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';
import { LockWorker } from '../support/worker-host.js';
import { benchConfig } from './config.js';
import { backgroundQps, type ContentionResult, type ContentionSetup, runContention } from './contention.js';
import { BENCH_SCHEMA, DESIGN_IDS, type DesignId, forUpdateDesign, leaseGrantStatements, naiveTableDesign, redlockDesign } from './designs.js';
import { benchEnvironment } from './environment.js';
import { checkTargets, renderReport } from './report.js';
import { runHeldLocks, runLogTable } from './scale.js';
import { hostNow } from './stats.js';
import { runUncontended, uncontendedItems } from './uncontended.js';

const CONTENTION_SCENARIO = new URL('./scenarios/contention.js', import.meta.url).href;
const started = hostNow();
const log = (line: string): void => {
  process.stderr.write(`[bench ${((hostNow() - started) / 1000).toFixed(1).padStart(6)} s] ${line}\n`);
};

async function createBenchDatabase(prefix: string): Promise<TestDatabase> {
  const db = await TestDatabase.create(prefix);
  for (const sql of BENCH_SCHEMA) await db.query(sql);
  await db.query("INSERT INTO bench_row_lock (k) VALUES ('bench:uncontended'), ('bench:contended:for-update')");
  return db;
}

async function main(): Promise<void> {
  const loadAtStart = loadavg()[0]!;
  const config = benchConfig();
  const redisUrl = process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379';
  log(`config ${JSON.stringify(config)}`);
  const notes: string[] = [];
  const cleanups: (() => Promise<unknown>)[] = [];
  const redis = new Redis(redisUrl, { lazyConnect: true, maxRetriesPerRequest: 1 });
  await redis.connect();
  cleanups.push(async () => redis.disconnect());
  const db = await createBenchDatabase('dblock_bench');
  cleanups.push(() => db.drop());
  try {
    const env = await benchEnvironment(db.admin, redis);
    log(`${env.cpus} CPUs ${env.cpuModel}; ${env.database}; Redis ${env.redis}; Node ${env.node}`);

    // Uncontended, in this process.
    const floor = await mysql.createConnection({ ...db.settings, multipleStatements: true });
    cleanups.push(() => floor.end());
    const { app, locks } = await createLockApp(db.settings, {});
    cleanups.push(() => app.close());
    const dataSource = app.get(DataSource);
    const forUpdate = forUpdateDesign(db.settings);
    const naive = naiveTableDesign(db.settings, `pid:${process.pid}`);
    const redlock = await redlockDesign(redisUrl);
    cleanups.push(() => forUpdate.close(), () => naive.close(), () => redlock.close());
    log('uncontended section');
    const uncontended = await runUncontended(uncontendedItems({ floor, locks, dataSource, forUpdate, naive, redlock }), locks, config, log);
    notes.push('Decorator overhead is measured through `LockService.runLocked`, the one method `@DistributedLock`/`@WriteLock` forward to (grant, new READ COMMITTED transaction, the write, the fence, COMMIT, release).');

    // Contention, in worker processes.
    log(`contention section: starting ${config.processes} worker processes`);
    const workers = await LockWorker.startMany(config.processes, { settings: db.settings });
    cleanups.push(() => Promise.all(workers.map((w) => w.close())));
    const grant = leaseGrantStatements();
    const setup: ContentionSetup = {
      workers,
      admin: db.admin,
      redis,
      redisUrl,
      usefulStatements: { lease: grant + 1, 'for-update': 3, 'get-lock': 2, redlock: 0, 'naive-table': 2 } satisfies Record<DesignId, number>,
      usefulRedisCommands: { lease: 0, 'for-update': 0, 'get-lock': 0, redlock: 2, 'naive-table': 0 },
      log,
    };
    const background = [await backgroundQps(db.admin, 1000)];
    const contention: ContentionResult[] = [];
    contention.push(await runContention(setup, config, 0, DESIGN_IDS));
    contention.push(await runContention(setup, config, 2, DESIGN_IDS));
    background.push(await backgroundQps(db.admin, 1000));
    await Promise.all(workers.map((w) => w.run(CONTENTION_SCENARIO, 'contentionClose')));

    log('scale section: held locks');
    const held = await runHeldLocks(db, config, log);
    log('scale section: big log table');
    const empty = await TestDatabase.create('dblock_bench_empty');
    cleanups.push(() => empty.drop());
    const big = await TestDatabase.create('dblock_bench_big');
    cleanups.push(() => big.drop());
    const logTable = await runLogTable(empty, big, config, log);

    notes.push(
      `Statement counts: one lease grant is one round trip of ${grant} statements (START TRANSACTION … COMMIT), a release one statement; ` +
        'SHOW GLOBAL STATUS counts each statement of a multi-statement round trip. "Useful" statements = the lock\'s statements for each successful hold plus the two of the critical section.',
      'The lease strategy runs with its defaults (retry backoff 10–200 ms with jitter, lease 30 s, pool of 4); node-redlock with its defaults ' +
        '(10 retries, 200 ms delay, 100 ms jitter, TTL 10 s here); a redlock caller whose tries run out (LockError) starts again, and its wait counts from its first try.',
      'The blocking `SELECT … FOR UPDATE` and `GET_LOCK` designs hold one database connection per waiting caller; the lease strategy holds none while waiting or holding.',
      'This library has no row-lock strategy yet in this build: its targets are left unmeasured rather than approximated.',
    );
    const results = { env, config, uncontended, contention, backgroundQps: background, held, logTable, durationMs: hostNow() - started, notes, grantStatements: grant, loadAverage: [loadAtStart, loadavg()[0]!] as [number, number] };
    mkdirSync(dirname(config.output), { recursive: true });
    writeFileSync(config.output, renderReport(results));
    log(`wrote ${config.output}`);
    for (const check of checkTargets(results)) log(`  ${check.verdict.padEnd(12)} ${check.target}: ${check.measured}`);
  } finally {
    for (const cleanup of cleanups.reverse()) await cleanup().catch((e: unknown) => log(`cleanup failed: ${String(e)}`));
  }
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    log(`FAILED: ${String((error as Error)?.stack ?? error)}`);
    process.exit(1);
  },
);
