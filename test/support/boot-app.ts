import 'reflect-metadata';
import { type DynamicModule, type INestApplicationContext, type LoggerService, type LogLevel, Module, type ModuleMetadata } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { TypeOrmModule } from '@nestjs/typeorm';
import { DataSource, type DataSourceOptions } from 'typeorm';
import { LockService } from '../../lib/index.js';
import { testDataSourceOptions } from './lock-app.js';
import type { ConnectionSettings } from './test-database.js';

export interface BootExtras {
  imports?: ModuleMetadata['imports'];
  providers?: ModuleMetadata['providers'];
  /** Goes to mysql2 through TypeORM's `extra` (e.g. `{ flags: ['-FOUND_ROWS'] }`). */
  mysqlExtra?: Record<string, unknown>;
  logger?: false | LogLevel[] | LoggerService;
  /** TypeORM DataSources to register instead of the one default DataSource on `settings`. */
  dataSources?: { name?: string; settings: ConnectionSettings }[];
}

/**
 * Boots a Nest application context with TypeORM on `settings` and the given DbLockModule
 * registration (forRoot or forRootAsync). Unlike createLockApp it is meant for bootstraps that
 * may fail: Nest does not abort the process, and if bootstrap throws, the DataSource it opened
 * is destroyed before the error is rethrown, so a failing test leaves no open handle behind.
 */
export async function bootLockApp(
  settings: ConnectionSettings,
  lockModule: DynamicModule,
  extras: BootExtras = {},
): Promise<{ app: INestApplicationContext; locks: LockService }> {
  const app = await bootApp(settings, [lockModule], extras);
  return { app, locks: app.get(LockService) };
}

/** bootLockApp for any number of DbLockModules (or none): the application context only. */
export async function bootApp(settings: ConnectionSettings, lockModules: DynamicModule[], extras: BootExtras = {}): Promise<INestApplicationContext> {
  // Every DataSource this bootstrap opens, as the promise of its initialisation: Nest may fail on
  // another provider while TypeORM is still connecting, so cleanup has to wait for those too.
  const opening: Promise<DataSource>[] = [];
  @Module({
    imports: [
      ...(extras.dataSources ?? [{ settings }]).map((dataSource) =>
        TypeOrmModule.forRootAsync({
          name: dataSource.name,
          useFactory: () => ({ ...testDataSourceOptions(dataSource.settings, extras.mysqlExtra ?? {}, 4), name: dataSource.name }),
          dataSourceFactory: async (options?: DataSourceOptions) => {
            const initialised = new DataSource(options!).initialize();
            opening.push(initialised);
            return initialised;
          },
        }),
      ),
      ...lockModules,
      ...(extras.imports ?? []),
    ],
    providers: extras.providers ?? [],
  })
  class BootModule {}
  try {
    return await NestFactory.createApplicationContext(BootModule, {
      logger: extras.logger ?? ['error', 'warn'],
      abortOnError: false,
    });
  } catch (error) {
    const settled = await Promise.allSettled(opening);
    for (const outcome of settled) if (outcome.status === 'fulfilled' && outcome.value.isInitialized) await outcome.value.destroy();
    throw error;
  }
}
