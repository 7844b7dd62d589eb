/**
 * Quick contention probe for development (not part of the report): P processes x C callers on one
 * key for a few designs, a few short rounds, printed as one line per round.
 * `node build/test/bench/probe-contention.js lease,for-update [pauseMs]`
 */
import 'reflect-metadata';
import { Redis } from 'ioredis';
import { TestDatabase } from '../support/test-database.js';
import { LockWorker } from '../support/worker-host.js';
import { benchConfig } from './config.js';
import { type ContentionSetup, runContention } from './contention.js';
import { BENCH_SCHEMA, type DesignId, leaseGrantStatements } from './designs.js';

async function main(): Promise<void> {
  const designs = (process.argv[2] ?? 'lease,for-update').split(',') as DesignId[];
  const pauseMs = Number(process.argv[3] ?? 0);
  const config = { ...benchConfig(), rounds: Number(process.env.BENCH_ROUNDS ?? 3), contentionWindowMs: Number(process.env.BENCH_WINDOW_MS ?? 2000) };
  const db = await TestDatabase.create('dblock_probe');
  const redis = new Redis(process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379', { lazyConnect: true });
  await redis.connect();
  for (const sql of BENCH_SCHEMA) await db.query(sql);
  await db.query("INSERT INTO bench_row_lock (k) VALUES ('bench:contended:for-update')");
  const workers = await LockWorker.startMany(config.processes, { settings: db.settings });
  try {
    const grant = leaseGrantStatements();
    const setup: ContentionSetup = {
      workers,
      admin: db.admin,
      redis,
      redisUrl: process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379',
      usefulStatements: { lease: grant + 1, 'for-update': 3, 'get-lock': 2, redlock: 0, 'naive-table': 2 },
      usefulRedisCommands: { lease: 0, 'for-update': 0, 'get-lock': 0, redlock: 2, 'naive-table': 0 },
      log: (line) => process.stdout.write(line + '\n'),
    };
    await runContention(setup, config, pauseMs, designs);
  } finally {
    await Promise.all(workers.map((w) => w.close()));
    redis.disconnect();
    await db.drop();
  }
}

main().then(
  () => process.exit(0),
  (e: unknown) => {
    console.error(e);
    process.exit(1);
  },
);
