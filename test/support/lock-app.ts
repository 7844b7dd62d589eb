import 'reflect-metadata';
import { type INestApplicationContext, Module, type DynamicModule } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { TypeOrmModule } from '@nestjs/typeorm';
import { DbLockModule, type DbLockModuleOptions, LockService } from '../../lib/index.js';
import type { ConnectionSettings } from './test-database.js';

/**
 * TypeORM options for a test database: the mysql driver, or the postgres driver for PostgreSQL
 * settings. `extra` goes to the driver's pool (mysql2 flags, pg pool options).
 */
export function testDataSourceOptions(settings: ConnectionSettings, extra: Record<string, unknown> = {}, poolSize = 10) {
  return {
    // Typed as mysql for callers that add mysql-only options; a PostgreSQL database gets the postgres driver.
    type: (settings.type ?? 'mysql') as 'mysql',
    host: settings.host,
    port: settings.port,
    username: settings.user,
    password: settings.password,
    database: settings.database,
    synchronize: false,
    logging: false,
    poolSize,
    extra,
    autoLoadEntities: true,
  };
}

/** TypeORM root module for a test database. */
export function typeOrmRoot(settings: ConnectionSettings, extra: Record<string, unknown> = {}, name?: string, poolSize?: number): DynamicModule {
  return TypeOrmModule.forRoot({ name, ...testDataSourceOptions(settings, extra, poolSize) });
}

/** A Nest application context with TypeORM and DbLockModule on `settings`, ready to use. */
export async function createLockApp(
  settings: ConnectionSettings,
  options: DbLockModuleOptions = {},
  extra: {
    imports?: NonNullable<Parameters<typeof Module>[0]>['imports'];
    providers?: NonNullable<Parameters<typeof Module>[0]>['providers'];
    mysqlExtra?: Record<string, unknown>;
    /** The DataSource's pool size (default 10). */
    poolSize?: number;
  } = {},
): Promise<{ app: INestApplicationContext; locks: LockService }> {
  @Module({
    imports: [typeOrmRoot(settings, extra.mysqlExtra, undefined, extra.poolSize), DbLockModule.forRoot(options), ...(extra.imports ?? [])],
    providers: extra.providers ?? [],
  })
  class TestLockModule {}
  const app = await NestFactory.createApplicationContext(TestLockModule, { logger: ['error', 'warn'] });
  await app.init();
  return { app, locks: app.get(LockService) };
}

/** Polls `check` until it returns true or `timeoutMs` passes: no fixed sleeps in tests. */
export async function eventually(check: () => boolean | Promise<boolean>, timeoutMs = 10_000, what = 'condition'): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (performance.now() < deadline) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`Timed out after ${timeoutMs} ms waiting for ${what}`);
}

/** The statuses of a key's log rows once none is live any more (an end written off the caller's path may land a moment later). */
export async function endedStatuses(db: { logRows(key: string): Promise<Record<string, unknown>[]> }, key: string): Promise<unknown[]> {
  let statuses: unknown[] = [];
  await eventually(
    async () => {
      statuses = (await db.logRows(key)).map((r) => r.status);
      return statuses.length > 0 && statuses.every((s) => s !== 'ACQUIRED' && s !== 'COMPLETED');
    },
    5_000,
    `ended rows of ${key}`,
  );
  return statuses;
}
