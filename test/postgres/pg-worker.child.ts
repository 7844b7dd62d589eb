/**
 * A process of a PostgreSQL app using the library (row-lock strategy), for the multi-process tests.
 * DB_LOCK_PG_CHILD_URL names the database; argv[2] the job:
 * - `count <key> <callers> <iterations> <locked> <row>`: racy read-then-write increments of a counter row,
 *   each in a locked call (or, locked = 0, the negative control: the same without the lock);
 *   prints `{"sections":n,"tokens":[…]}`.
 * - `hold <key> <ms>`: takes the key, prints HELD, keeps it `ms` while its transaction writes row 2
 *   of the counter, then commits and prints DONE.
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
    DbLockModule.forRoot({ strategy: 'row-lock', escapedWrites: 'ignore' }),
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
          await locks.withLock(
            key!,
            async (handle) => {
              tokens.push(handle.fencingToken);
              await increment((sql) => handle.manager!.query(sql));
            },
            { timeoutMs: 60_000 },
          );
      }
    }),
  );
  process.stdout.write(`${JSON.stringify({ sections, tokens })}\n`);
} else if (job === 'hold') {
  await locks.withLock(
    key!,
    async (handle) => {
      process.stdout.write('HELD\n');
      await handle.manager!.query('UPDATE counter SET value = value + 1 WHERE id = 2');
      await sleep(Number(a));
    },
    { timeoutMs: 10_000 },
  );
  process.stdout.write('DONE\n');
}
await app.close();
