import type { DataSource } from 'typeorm';

/** mysql2's pool size when nothing sets `connectionLimit`. */
export const MYSQL2_DEFAULT_CONNECTION_LIMIT = 10;

/**
 * Size of the app's DataSource pool: the live mysql2 pool's `connectionLimit` when the driver
 * exposes it, else what the options say (`extra.connectionLimit` wins over `poolSize`, as in
 * TypeORM's MysqlDriver), else mysql2's default.
 */
export function businessPoolSize(dataSource: DataSource): number {
  const driver = dataSource.driver as unknown as { pool?: { config?: { connectionLimit?: unknown } } };
  const live = driver.pool?.config?.connectionLimit;
  if (typeof live === 'number' && live > 0) return live;
  const options = dataSource.options as { poolSize?: unknown; extra?: { connectionLimit?: unknown } };
  const configured = options.extra?.connectionLimit ?? options.poolSize;
  return typeof configured === 'number' && configured > 0 ? configured : MYSQL2_DEFAULT_CONNECTION_LIMIT;
}
