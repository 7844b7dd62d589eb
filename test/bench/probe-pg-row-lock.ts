/**
 * Development probe: PostgreSQL row-lock `@WriteLock` path against its floors, one caller, in
 * blocks of 20 ops, interleaved: the plain TypeORM transaction with one UPDATE, the library's
 * runLocked (row-lock) with the same UPDATE, and the library's own statements sent by hand on a
 * TypeORM query runner (3 round trips: BEGIN + take, the UPDATE, audit row + COMMIT), with and
 * without the writers' queue lock. `node build/test/bench/probe-pg-row-lock.js`; `PROBE_TIMELINE=1` adds,
 * per item, the client CPU per op and the median time of each statement's send and answer (and, for
 * the library, of the store's take and commit calls and of the work's start and end);
 * `PROBE_ONLY=library` runs the library alone, 20,000 ops (for `node --cpu-prof`).
 */
import 'reflect-metadata';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { TypeOrmModule } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { DbLockModule, LockService } from '../../lib/index.js';
import { counterDatabase } from './postgres/pg-contention.js';
import { resolveTargets } from '../../lib/core/lock-key.js';
import { groupsOf } from '../../lib/store/key-groups.js';
import { takeGroupStatement } from '../../lib/store/postgres/pg-row-lock.sql.js';
import { PgRowLockStore } from '../../lib/store/postgres/pg-row-locks.js';
import { printTimeline, type TimelineMarks } from './postgres/pg-timeline.js';
import { insertAuditRows } from '../../lib/store/postgres/pg-log-rows.sql.js';

let mark: (label: string) => void = () => undefined;
const UPDATE = 'UPDATE bench_counter SET v = v + 1 WHERE id = 1';
const db = await counterDatabase();
try {
  @Module({
    imports: [
      TypeOrmModule.forRoot({ type: 'postgres', url: db.url, autoLoadEntities: true, poolSize: 10 }),
      DbLockModule.forRoot({ escapedWrites: 'ignore', janitor: { intervalMs: 3_600_000 } }),
    ],
  })
  class ProbeApp {}
  const app = await NestFactory.createApplicationContext(ProbeApp, { logger: ['error'] });
  const locks = app.get(LockService);
  const dataSource = app.get(DataSource);
  await locks.runLocked('probe:hand', async () => undefined, { strategy: 'row-lock' }); // its key row
  const [target] = resolveTargets('probe:hand', 'write', 'default');
  const group = groupsOf([target!])[0]!;
  const take = takeGroupStatement(group, 10_000).sql;
  const takeNoQueue = take.replace(/, pg_advisory_xact_lock\(\d+\)/, '');
  const audit = (token: number) =>
    insertAuditRows(
      [{ key: target!.bytes, mode: 'write', owner: 'probe', fencingToken: token, status: 'COMMITTED', holdMs: 0, waitedMs: 0 } as never],
      'probe',
    );
  const byHand = (sql: string) => async () => {
    const runner = dataSource.createQueryRunner('master');
    await runner.connect();
    try {
      const results = (await runner.query(`BEGIN ISOLATION LEVEL READ COMMITTED;\n${sql}`)) as unknown;
      void results;
      await runner.query(UPDATE);
      await runner.query(`${audit(1)};\nCOMMIT`);
    } finally {
      await runner.release();
    }
  };
  const all: [string, () => Promise<unknown>][] = [
    ['plain TypeORM transaction', () => dataSource.transaction(async (m) => void (await m.query(UPDATE)))],
    [
      'library runLocked row-lock',
      () =>
        locks.runLocked(
          'probe:lib',
          async () => {
            mark('fn start');
            await locks.manager.query(UPDATE);
            mark('fn end');
          },
          { strategy: 'row-lock' },
        ),
    ],
    ['by hand, library statements', byHand(take)],
    ['by hand, no queue lock', byHand(takeNoQueue)],
  ];
  // PROBE_ONLY=library: the library alone (for --cpu-prof), many more ops.
  const items = process.env.PROBE_ONLY ? all.filter(([n]) => n.includes(process.env.PROBE_ONLY!)) : all;
  if (process.env.PROBE_ONLY) for (let i = 0; i < 20000; i++) await items[0]![1]();
  const times = new Map<string, number[]>(items.map(([n]) => [n, []]));
  for (let round = 0; round < 15; round++)
    for (const [name, op] of items) {
      const started = performance.now();
      for (let i = 0; i < 20; i++) await op();
      if (round >= 3) times.get(name)!.push((performance.now() - started) / 20);
    }
  const base = median(times.get(items[0]![0])!);
  for (const [name, t] of times) console.log(`${name.padEnd(32)} ${median(t).toFixed(3)} ms  ${(median(t) / base).toFixed(2)}×`);
  console.log('take statement:', take.replace(/\n/g, ' | '));
  if (process.env.PROBE_TIMELINE === '1') {
    const idle = process.cpuUsage();
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const used = process.cpuUsage(idle);
    console.log(`idle: client CPU ${((used.user + used.system) / 1000).toFixed(1)} ms in 1 s`);
    const marking = ({ note, wrap }: TimelineMarks) => {
      mark = note;
      wrap(PgRowLockStore.prototype, 'beginAndTake');
      wrap(PgRowLockStore.prototype, 'recordAndCommit');
    };
    for (const [name, op] of [...items, ...items]) await printTimeline(name, op, name.startsWith('library') ? marking : undefined);
    mark = () => undefined;
  }
  await app.close();
} finally {
  await db.drop();
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}
