import { DataSource, type DataSourceOptions } from 'typeorm';
import { DB_LOCK_MIGRATIONS } from '../../lib/index.js';
import type { ConnectionSettings } from './test-database.js';

/** A bare TypeORM DataSource on `s` with the shipped migrations (not initialized): what an app's migration CLI would run. */
export function migrationDataSource(s: ConnectionSettings, extra: Partial<DataSourceOptions> = {}): DataSource {
  return new DataSource({
    type: 'mariadb',
    host: s.host,
    port: s.port,
    username: s.user,
    password: s.password,
    database: s.database,
    migrations: DB_LOCK_MIGRATIONS,
    logging: false,
    ...extra,
  } as DataSourceOptions);
}
