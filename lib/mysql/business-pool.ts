import type { DataSource } from 'typeorm';

/** mysql2's pool size when nothing sets `connectionLimit`. */
export const MYSQL2_DEFAULT_CONNECTION_LIMIT = 10;

/**
 * Connections a 'requires-new' locked call needs from the app's DataSource pool while its caller
 * may hold one (a request running in its own TypeORM transaction): the caller's and the new one.
 */
export const CONNECTIONS_PER_REQUIRES_NEW_CALL = 2;

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

/**
 * The bootstrap warning for a pool that cannot carry REQUIRES_NEW, or undefined when it can. A
 * caller that holds a connection and calls a 'requires-new' method waits for a second one; with
 * fewer than two it waits forever (spring-framework #26250), and mysql2 waits without a limit.
 */
export function businessPoolWarning(dataSource: DataSource, dataSourceName: string): string | undefined {
  const size = businessPoolSize(dataSource);
  if (size >= CONNECTIONS_PER_REQUIRES_NEW_CALL) return undefined;
  return (
    `DataSource '${dataSourceName}' has a pool of ${size} connection(s). A lock decorator with transaction 'requires-new' ` +
    `(the default) opens a second transaction on that pool while its caller may hold a connection: it needs at least ` +
    `${CONNECTIONS_PER_REQUIRES_NEW_CALL}, and one more per caller that holds a connection while calling locked methods concurrently. ` +
    `Raise TypeORM's poolSize (or extra.connectionLimit), or use transaction: 'none'.`
  );
}
