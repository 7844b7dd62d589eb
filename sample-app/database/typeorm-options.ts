import type { TypeOrmModuleOptions } from '@nestjs/typeorm';
import { connectionOptions, type SampleConfig } from '../config/sample-config.js';
import { CreateLendingTables1795392000000 } from '../migrations/create-lending-tables.migration.js';
import { DB_LOCK_MIGRATIONS } from '../nestjs-db-lock.js';
import { kindOfUrl } from './database-kind.js';

/**
 * The app's one DataSource, on MySQL/MariaDB or PostgreSQL as the URL's scheme says. The lock
 * tables come from the library's migration, the sample's tables from its own: both run at
 * startup (`migrationsRun`), never `synchronize`.
 *
 * TypeORM migrations are not safe to run from several instances starting at the same moment on
 * an empty database; start one first (the demo does), or run migrations as a deploy step.
 */
export function typeOrmOptions(config: SampleConfig): TypeOrmModuleOptions {
  const { host, port, user, password, database } = connectionOptions(config.databaseUrl);
  const common = {
    host,
    port,
    username: user,
    password,
    database,
    autoLoadEntities: true,
    synchronize: false,
    migrations: [...DB_LOCK_MIGRATIONS, CreateLendingTables1795392000000],
    migrationsRun: true,
    // A fenced call needs a second connection while a request may hold one (see the README).
    poolSize: 10,
    // main.ts already checked the server answers: fail fast rather than retry for half a minute.
    retryAttempts: 1,
    retryDelay: 1_000,
  };
  if (kindOfUrl(config.databaseUrl) === 'postgres')
    // Times are timestamptz there: each value is one instant, whatever the session's time zone.
    return { type: 'postgres', ...common };
  // DATETIMEs are UTC in every table (the lock log uses the server's UTC_TIMESTAMP); MySQL's
  // DATETIME carries no zone, so the driver must be told to read and write them as UTC.
  return { type: 'mysql', ...common, timezone: 'Z' };
}
