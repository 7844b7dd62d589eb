/** Wiring of each section: what it starts (app, workers, databases), runs, and closes again. */
import mysql from 'mysql2/promise';
import type { Redis } from 'ioredis';
import { DataSource } from 'typeorm';
import { createLockApp } from '../support/lock-app.js';
import { RUNNING_PARTS } from '../../lib/lock-service.assembly.js';
import { TestDatabase } from '../support/test-database.js';
import { LockWorker } from '../support/worker-host.js';
import type { BenchConfig } from './config.js';
import { closeContention, type ContentionResult, runContention } from './contention.js';
import { designDeps } from './designs/deps.js';
import { createDesign, DESIGN_IDS, type DesignId, type LockDesign } from './designs/index.js';
import { type HeldLocksResult, type LogTableResult, runHeldLocks, runLogTable } from './scale.js';
import { runUncontended, type UncontendedResult } from './uncontended.js';
import { FLOOR_KEY, ROW_LOCK_FLOOR_KEY, uncontendedItems } from './uncontended-items.js';

type Log = (line: string) => void;

/** The designs the uncontended items drive, and the key each uses. */
const UNCONTENDED_DESIGNS: [DesignId, string][] = [
  ['for-update', 'bench:u:for-update'],
  ['naive-table', 'bench:u:naive'],
  ['redlock', 'bench:u:redlock'],
  ['row-lock', 'bench:u:row-lock'],
];

/** In the bench's own process: one app (janitor on, defaults), the floors on a plain connection. */
export async function uncontendedSection(db: TestDatabase, redisUrl: string, config: BenchConfig, log: Log): Promise<UncontendedResult> {
  const floor = await mysql.createConnection({ ...db.settings, multipleStatements: true });
  const { app, locks } = await createLockApp(db.settings, {});
  const designs = new Map<DesignId, LockDesign>();
  try {
    // The row-lock floor's key row with its lease marker set, as a row-lock writer leaves it: the begin-and-take routine's UPDATE matches it.
    await floor.query('INSERT INTO db_lock (lock_key, fencing_token, no_lease_holders) VALUES (?, 0, 0), (?, 0, 1)', [FLOOR_KEY, ROW_LOCK_FLOOR_KEY]);
    const deps = designDeps(locks, app.get(DataSource), db.settings, redisUrl);
    for (const [id, key] of UNCONTENDED_DESIGNS) {
      const design = await createDesign(id, deps);
      await design.prepare(key);
      designs.set(id, design);
    }
    const items = uncontendedItems({ floor, locks, dataSource: deps.dataSource, designs });
    // The pool's counter itself, read around every op: stats() would sort its duration windows each
    // time, and that work between two ops (caches, garbage) would weigh on the op that follows.
    const libraryTrips = RUNNING_PARTS.get(locks)!.store.roundTrips;
    const roundTrips = (): number => libraryTrips.locks + deps.dataSourceQueries();
    const result = await runUncontended(items, roundTrips, config, log);
    await Promise.all([...designs.values()].map((d) => d.close()));
    await deps.slots.close();
    return result;
  } finally {
    await app.close();
    await floor.end();
  }
}

/** In worker processes, each a Nest app with the library's defaults. */
export async function contentionSection(db: TestDatabase, redis: Redis, redisUrl: string, config: BenchConfig, log: Log): Promise<ContentionResult> {
  log(`  starting ${config.processes} worker processes`);
  const workers = await LockWorker.startMany(config.processes, { settings: db.settings, mysqlExtra: { multipleStatements: true } });
  try {
    const result = await runContention({ workers, admin: db.admin, redis, redisUrl, log }, config, DESIGN_IDS);
    await closeContention(workers);
    return result;
  } finally {
    await Promise.all(workers.map((w) => w.close()));
  }
}

export async function scaleSection(db: TestDatabase, config: BenchConfig, log: Log): Promise<{ held: HeldLocksResult; logTable: LogTableResult }> {
  log('  held locks');
  const held = await runHeldLocks(db, config, log);
  log('  big log table');
  const empty = await TestDatabase.create('dblock_bench_empty');
  const big = await TestDatabase.create('dblock_bench_big');
  try {
    return { held, logTable: await runLogTable(empty, big, config, log) };
  } finally {
    await empty.drop();
    await big.drop();
  }
}
