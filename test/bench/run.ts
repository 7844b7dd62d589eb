/**
 * `npm run bench`: measures this library against the floors and the peers users would pick
 * instead, on loopback, and writes docs/benchmarks.md (BENCH_OUTPUT to redirect). BENCH_QUICK=1
 * for a short indicative run, BENCH_SECTIONS to run some sections only; every knob is in config.ts.
 * Needs MariaDB/MySQL (DB_LOCK_TEST_URL, default mysql://root@127.0.0.1:3306) and Redis
 * (BENCH_REDIS_URL, default redis://127.0.0.1:6379); PostgreSQL (DB_LOCK_TEST_PG_URL, default
 * 127.0.0.1:5432) for its section, skipped when no server answers.
 */
import 'reflect-metadata';
import { mkdirSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { dirname } from 'node:path';
import { Redis } from 'ioredis';
import { TestDatabase } from '../support/test-database.js';
import { benchConfig } from './config.js';
import { BENCH_SCHEMA } from './designs/index.js';
import { benchEnvironment } from './environment.js';
import { renderReport } from './report/render.js';
import type { BenchResults } from './report/results.js';
import { checkTargets } from './report/targets.js';
import { contentionSection, scaleSection, uncontendedSection } from './sections.js';
import { hostNow } from './stats.js';
import { semaphoreSection } from './semaphore.js';
import { postgresSection } from './postgres/pg-section.js';

const started = hostNow();
const log = (line: string): void => {
  process.stderr.write(`[bench ${((hostNow() - started) / 1000).toFixed(1).padStart(6)} s] ${line}\n`);
};

async function main(): Promise<void> {
  const config = benchConfig();
  const redisUrl = process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379';
  log(`config ${JSON.stringify(config)}`);
  const redis = new Redis(redisUrl, { lazyConnect: true, maxRetriesPerRequest: 1 });
  await redis.connect();
  const db = await TestDatabase.create('dblock_bench');
  try {
    for (const sql of BENCH_SCHEMA) await db.query(sql);
    const env = await benchEnvironment(db.admin, redis);
    log(
      `${env.cpus} CPUs ${env.cpuModel}; ${env.database}; Redis ${env.redis}; Node ${env.node}; load ${env.loadAtStart.map((l) => l.toFixed(1)).join(' ')}`,
    );
    const results: BenchResults = { env, config, durationMs: 0, loadAtEnd: [] };
    if (config.sections.includes('uncontended')) {
      log('uncontended section');
      results.uncontended = await uncontendedSection(db, redisUrl, config, log);
    }
    if (config.sections.includes('contention')) {
      log('contention section');
      results.contention = await contentionSection(db, redis, redisUrl, config, log);
    }
    if (config.sections.includes('semaphore')) {
      log('semaphore section');
      results.semaphore = await semaphoreSection(db, config, log);
    }
    if (config.sections.includes('scale')) {
      log('scale section');
      const scale = await scaleSection(db, config, log);
      results.held = scale.held;
      results.logTable = scale.logTable;
    }
    if (config.sections.includes('postgres')) {
      log('postgres section');
      results.postgres = await postgresSection(config, log);
    }
    results.durationMs = hostNow() - started;
    results.loadAtEnd = loadavg();
    mkdirSync(dirname(config.output), { recursive: true });
    writeFileSync(config.output, renderReport(results));
    log(`wrote ${config.output}`);
    for (const check of checkTargets(results)) log(`  ${check.verdict.padEnd(12)} ${check.target}: ${check.measured}`);
  } finally {
    redis.disconnect();
    await db.drop();
  }
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    log(`FAILED: ${String((error as Error)?.stack ?? error)}`);
    process.exit(1);
  },
);
