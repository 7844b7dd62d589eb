/**
 * Child process of without-mysql2.test.ts, started with mysql2 made unresolvable: a PostgreSQL app's
 * view of the library: the migrations, the module's start and a lock. Prints one JSON line with what it saw.
 */
import 'reflect-metadata';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { TypeOrmModule } from '@nestjs/typeorm';
import { DbLockModule, LockService } from '../../lib/index.js';
import { PgTestDatabase } from '../support/pg-test-database.js';

const seen: Record<string, unknown> = {};
seen.mysql2Blocked = await import('mysql2').then(
  () => false,
  () => true,
);
const db = await PgTestDatabase.create('dblock_pg_nomysql');
try {
  const dataSource = await db.dataSource();
  seen.migrationsRun = (await dataSource.runMigrations()).length;
  @Module({ imports: [TypeOrmModule.forRoot({ ...db.options(), autoLoadEntities: true }), DbLockModule.forRoot({ strategy: 'row-lock' })] })
  class PgApp {}
  const app = await NestFactory.createApplicationContext(PgApp, { logger: false, abortOnError: false });
  seen.token = await app.get(LockService).withLock('no-mysql2', async (handle) => handle.fencingToken);
  await app.close();
} finally {
  await db.drop();
}
process.stdout.write(`${JSON.stringify(seen)}\n`);
