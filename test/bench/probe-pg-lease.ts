/**
 * Development probe: PostgreSQL lease `withLock` (empty fn) against its physical floor by hand
 * (the one-statement grant of a key known free, then the release UPDATE, on a pg.Pool as the
 * library uses one), one caller, interleaved blocks of 50 ops: latency and client CPU per op.
 * `PROBE_SET=decorated`: the `@WriteLock` path against its floor instead; `PROBE_TIMELINE=1` prints
 * when each statement was sent and answered, and when the store's calls began and ended, per op.
 * `node [--cpu-prof] build/test/bench/probe-pg-lease.js [ops per block] [only library: 1]`
 */
import 'reflect-metadata';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { TypeOrmModule } from '@nestjs/typeorm';
import pg from 'pg';
import { DataSource } from 'typeorm';
import { DbLockModule, LockService } from '../../lib/index.js';
import { PgTestDatabase } from '../support/pg-test-database.js';
import { randomUUID } from 'node:crypto';
import { resolveTargets } from '../../lib/core/lock-key.js';
import type { LockRuntime } from '../../lib/core/lock-runtime.js';
import type { LockStore } from '../../lib/store/lock-store.js';
import { printTimeline } from './postgres/pg-timeline.js';
import { FLOOR_KEY as KEY, GRANT_BY_HAND as GRANT, RELEASE_BY_HAND as RELEASE } from './postgres/pg-section.js';

const ops = Number(process.argv[2] ?? 50);
const onlyLibrary = process.argv[3] === '1';

const db = await PgTestDatabase.create('dblock_probe_pg');
try {
  const setup = await db.dataSource();
  await setup.runMigrations();
  await setup.query(`INSERT INTO db_lock (lock_key, fencing_token, no_lease_holders) VALUES (${KEY}, 0, 1)`);
  await setup.query('CREATE TABLE bench_counter (id int PRIMARY KEY, v bigint NOT NULL)');
  await setup.query('INSERT INTO bench_counter VALUES (1, 0), (2, 0)');
  @Module({
    imports: [
      TypeOrmModule.forRoot({ type: 'postgres', url: db.url, autoLoadEntities: true, poolSize: 10 }),
      DbLockModule.forRoot({ escapedWrites: 'ignore', janitor: { intervalMs: 3_600_000 } }),
    ],
  })
  class ProbeApp {}
  const app = await NestFactory.createApplicationContext(ProbeApp, { logger: ['error'] });
  const locks = app.get(LockService);
  const pool = new pg.Pool({ connectionString: db.url, max: 2 });
  const parts = (locks as unknown as { parts: { store: LockStore; runtime: LockRuntime } }).parts;
  const targets = resolveTargets('probe:store', 'write', 'default');
  const runtimeTargets = resolveTargets('probe:runtime', 'write', 'default');
  const dataSource = app.get(DataSource);
  const UPDATE = (id: number) => `UPDATE bench_counter SET v = v + 1 WHERE id = ${id}`;
  const decorated: [string, () => Promise<unknown>][] = [
    ['plain TypeORM transaction', () => dataSource.transaction(async (m) => void (await m.query(UPDATE(1))))],
    [
      'floor: the grant by hand, then the plain transaction',
      async () => {
        await pool.query(GRANT);
        await dataSource.transaction(async (m) => void (await m.query(UPDATE(1))));
      },
    ],
    ['library runLocked (lease)', () => locks.runLocked('probe:decorated', async () => void (await locks.manager.query(UPDATE(2))))],
  ];
  const items: [string, () => Promise<unknown>][] =
    process.env.PROBE_SET === 'decorated'
      ? decorated.filter(([name]) => !onlyLibrary || name.startsWith('library'))
      : [
          ['library withLock (lease)', () => locks.withLock('probe:lease', async () => undefined)],
          [
            'ablation: runtime acquire + release',
            async () => {
              const lock = await parts.runtime.acquire({
                targets: runtimeTargets,
                mode: 'write',
                strategy: 'lease',
                timeoutMs: 120_000,
                leaseMs: 30_000,
                maxAttempts: Infinity,
              } as never);
              await parts.runtime.release(lock, false);
            },
          ],
          [
            "ablation: the same statements as by hand on the library's PgLockPool",
            async () => {
              const lockPool = (parts.store.log as unknown as { pool: { query(sql: string, purpose: string): Promise<pg.QueryResult[]> } }).pool;
              const [granted] = await lockPool.query(GRANT, 'locks');
              await lockPool.query(RELEASE(String((granted!.rows[0] as { id: string }).id)), 'locks');
            },
          ],
          [
            'ablation: store grant + endRows',
            async () => {
              const answer = await parts.store.log.grant(
                {
                  acquisitionId: randomUUID(),
                  strategy: 'lease',
                  targets,
                  leaseMs: 30_000,
                  waitedMs: 0,
                  writerWaitMarkMs: 0,
                  writerPreference: true,
                },
                performance.now() + 120_000,
              );
              if (!answer.granted) throw new Error('not granted');
              await parts.store.log.endRows([answer.rows[0]!.id], 'RELEASED' as never);
            },
          ],
          ...(onlyLibrary
            ? []
            : ([
                [
                  'by hand on a pg.Pool',
                  async () => {
                    const granted = await pool.query(GRANT);
                    await pool.query(RELEASE(String((granted.rows[0] as { id: string }).id)));
                  },
                ],
              ] as [string, () => Promise<unknown>][])),
        ];
  if (process.env.PROBE_TIMELINE === '1')
    for (const [name, op] of items)
      await printTimeline(
        name,
        op,
        ({ wrap }) => {
          const log = parts.store.log as unknown as { pool: object };
          wrap(log, 'grant');
          wrap(log.pool, 'acquireDedicated');
          wrap(parts.runtime, 'acquire');
        },
        { ops: 200, warmup: 100 },
      );
  const times = new Map<string, number[]>(items.map(([name]) => [name, []]));
  const cpus = new Map<string, number[]>(items.map(([name]) => [name, []]));
  for (let round = 0; round < 40; round++) {
    for (const [name, op] of items) {
      const cpu = process.cpuUsage();
      const start = performance.now();
      for (let i = 0; i < ops; i++) await op();
      const elapsed = (performance.now() - start) / ops;
      const used = process.cpuUsage(cpu);
      if (round >= 5) {
        times.get(name)!.push(elapsed);
        cpus.get(name)!.push((used.user + used.system) / 1000 / ops);
      }
    }
  }
  const median = (values: number[]) => [...values].sort((a, b) => a - b)[values.length >> 1]!;
  for (const [name] of items)
    console.log(`${name}: ${median(times.get(name)!).toFixed(3)} ms/op, client CPU ${median(cpus.get(name)!).toFixed(3)} ms/op`);
  await pool.end();
  await app.close();
} finally {
  await db.drop();
}
