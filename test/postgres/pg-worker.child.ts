/**
 * A process of a PostgreSQL app using the library, for the multi-process tests. DB_LOCK_PG_CHILD_URL
 * names the database, DB_LOCK_PG_CHILD_STRATEGY the strategy ('row-lock' unless set),
 * DB_LOCK_PG_CHILD_LEASE_MS the lease; each locked call runs in its fenced transaction
 * (`runLocked`, the work through `locks.manager`); argv[2] the job:
 * - `count <key> <callers> <iterations> <locked> <row>`: racy read-then-write increments of a counter row,
 *   each in a locked call (or, locked = 0, the negative control: the same without the lock);
 *   prints `{"sections":n,"tokens":[…]}`.
 * - `hold <key> <ms> [late]`: takes the key, prints HELD, keeps it `ms` while its transaction writes row 2
 *   of the counter (after the wait with `late`, so a stalled holder keeps no row of it locked), then
 *   commits and prints DONE (FAILED and the error's name if the call failed).
 */
import 'reflect-metadata';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { TypeOrmModule } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { DB_LOCK_ENTITIES, DbLockModule, LockService } from '../../lib/index.js';

const [job, key, a, b, c, d] = process.argv.slice(2);

@Module({
  imports: [
    TypeOrmModule.forRoot({ type: 'postgres', url: process.env.DB_LOCK_PG_CHILD_URL, entities: DB_LOCK_ENTITIES, poolSize: 10 }),
    DbLockModule.forRoot({
      strategy: (process.env.DB_LOCK_PG_CHILD_STRATEGY ?? 'row-lock') as 'lease' | 'row-lock',
      escapedWrites: 'ignore',
      ...(process.env.DB_LOCK_PG_CHILD_LEASE_MS ? { leaseMs: Number(process.env.DB_LOCK_PG_CHILD_LEASE_MS) } : {}),
    }),
  ],
})
class ChildApp {}

const app = await NestFactory.createApplicationContext(ChildApp, { logger: ['error'] });
const locks = app.get(LockService);
const dataSource = app.get(DataSource);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

if (job === 'count') {
  const [callers, iterations, locked, row] = [Number(a), Number(b), c === '1', Math.trunc(Number(d))];
  const tokens: number[] = [];
  let sections = 0;
  const increment = async (query: (sql: string) => Promise<{ value: number }[]>) => {
    const [read] = await query(`SELECT value FROM counter WHERE id = ${row}`);
    await sleep(1);
    await query(`UPDATE counter SET value = ${Number(read!.value) + 1} WHERE id = ${row}`);
    sections++;
  };
  await Promise.all(
    Array.from({ length: callers }, async () => {
      for (let i = 0; i < iterations; i++) {
        if (!locked) await increment((sql) => dataSource.query(sql));
        else
          await locks.runLocked(
            key!,
            async (handle) => {
              tokens.push(handle.fencingToken);
              await increment((sql) => locks.manager.query(sql));
            },
            { timeoutMs: 60_000 },
          );
      }
    }),
  );
  process.stdout.write(`${JSON.stringify({ sections, tokens })}\n`);
} else if (job === 'hold') {
  const outcome = await locks
    .runLocked(
      key!,
      async () => {
        process.stdout.write('HELD\n');
        const write = () => locks.manager.query('UPDATE counter SET value = value + 1 WHERE id = 2');
        if (b !== 'late') await write();
        await sleep(Number(a));
        if (b === 'late') await write();
      },
      { timeoutMs: 10_000 },
    )
    .then(
      () => 'DONE',
      (error: Error) => `FAILED ${error.name}`,
    );
  process.stdout.write(`${outcome}\n`);
}
await app.close();
