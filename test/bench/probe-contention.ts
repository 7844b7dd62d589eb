/**
 * Development probe (not part of the report): P processes × C callers on one key for a few
 * designs, a few short rounds, one line per round.
 * `node build/test/bench/probe-contention.js lease,row-lock,for-update [pauseMs]`
 */
import 'reflect-metadata';
import { Redis } from 'ioredis';
import { TestDatabase } from '../support/test-database.js';
import { LockWorker } from '../support/worker-host.js';
import { benchConfig } from './config.js';
import { closeContention, runContention } from './contention.js';
import { BENCH_SCHEMA, type DesignId } from './designs/index.js';
import { runProbe } from './probe-main.js';

async function main(): Promise<void> {
  const designs = (process.argv[2] ?? 'lease,for-update').split(',') as DesignId[];
  const pauseMs = Number(process.argv[3] ?? 0);
  const config = { ...benchConfig(), rounds: Number(process.env.BENCH_ROUNDS ?? 3), contentionWindowMs: Number(process.env.BENCH_WINDOW_MS ?? 2000) };
  const redisUrl = process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379';
  const db = await TestDatabase.create('dblock_probe');
  const redis = new Redis(redisUrl, { lazyConnect: true });
  await redis.connect();
  for (const sql of BENCH_SCHEMA) await db.query(sql);
  const workers = await LockWorker.startMany(config.processes, { settings: db.settings, mysqlExtra: { multipleStatements: true } });
  try {
    await runContention({ workers, admin: db.admin, redis, redisUrl, log: (line) => process.stdout.write(line + '\n') }, config, designs, [pauseMs]);
    await closeContention(workers);
  } finally {
    await Promise.all(workers.map((w) => w.close()));
    redis.disconnect();
    await db.drop();
  }
}

runProbe(main);
