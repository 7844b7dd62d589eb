/**
 * One process of the PostgreSQL hot-key contention (pg-contention.ts): `callers` callers loop on
 * one key for the window, each hold incrementing the counter row, and print their holds and wait
 * latencies. Designs: `for-update` (a bare `SELECT … FOR UPDATE` transaction on a plain pg pool),
 * `advisory` (`pg_advisory_xact_lock` in a transaction), `lease` and `row-lock` (the library,
 * `runLocked` with the increment through `locks.manager`). argv: design url callers warmupMs windowMs.
 */
import 'reflect-metadata';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { TypeOrmModule } from '@nestjs/typeorm';
import pg from 'pg';
import { DbLockModule, LockService } from '../../../lib/index.js';

const [design, url, callersText, warmupText, windowText] = process.argv.slice(2) as [string, string, string, string, string];
const callers = Number(callersText);
const KEY = 'bench:pg:hot';
const INCREMENT = 'UPDATE bench_counter SET v = v + 1 WHERE id = 1';

async function holdOnce(): Promise<() => Promise<void>> {
  if (design === 'for-update' || design === 'advisory') {
    const pool = new pg.Pool({ connectionString: url, max: callers });
    const lock = design === 'for-update' ? `SELECT v FROM bench_counter WHERE id = 1 FOR UPDATE` : `SELECT pg_advisory_xact_lock(4242)`;
    return async () => {
      const client = await pool.connect();
      try {
        await client.query(`BEGIN; ${lock}`);
        await client.query(INCREMENT);
        await client.query('COMMIT');
      } finally {
        client.release();
      }
    };
  }
  @Module({
    imports: [
      TypeOrmModule.forRoot({ type: 'postgres', url, autoLoadEntities: true, poolSize: callers + 2 }),
      DbLockModule.forRoot({ strategy: design as 'lease' | 'row-lock', escapedWrites: 'ignore', janitor: { intervalMs: 3_600_000 } }),
    ],
  })
  class ContenderApp {}
  const app = await NestFactory.createApplicationContext(ContenderApp, { logger: ['error'] });
  const locks = app.get(LockService);
  return async () => {
    await locks.runLocked(KEY, async () => void (await locks.manager.query(INCREMENT)), { timeoutMs: 30_000 });
  };
}

const hold = await holdOnce();
process.stdout.write('READY\n');
// The parent starts every process's window at once: it writes GO when all are ready.
await new Promise<void>((resolve) => process.stdin.once('data', () => resolve()));
const start = performance.now();
const warmEnd = start + Number(warmupText);
const end = warmEnd + Number(windowText);
const waits: number[] = [];
let holds = 0;
await Promise.all(
  Array.from({ length: callers }, async () => {
    while (performance.now() < end) {
      const asked = performance.now();
      await hold();
      if (asked >= warmEnd && performance.now() <= end) {
        holds++;
        waits.push(performance.now() - asked);
      }
    }
  }),
);
process.stdout.write(`${JSON.stringify({ holds, waits })}\n`);
process.exit(0);
