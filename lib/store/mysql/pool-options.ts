import type { DataSource } from 'typeorm';
import { format, type PoolOptions } from 'mysql2';
import { DbLockOptionsError } from '../../errors/db-lock-options.error.js';

/**
 * Connection settings for the library's own small pool, taken from the app's DataSource so
 * there is nothing to configure twice. We reuse TypeORM's own translation when it is there
 * (url, ssl, socketPath, extra...) and then force what the lock protocol relies on:
 * - multipleStatements: a grant is one round trip (several statements and a COMMIT);
 * - UTC dates as strings: all lease arithmetic happens on the server in UTC;
 * - big numbers as strings: fencing tokens are BIGINT;
 * - statements sent as written (literalStatements).
 * The DataSource itself is never opened, closed or reconfigured by the library.
 */
export function lockPoolOptions(dataSource: DataSource, poolSize: number): PoolOptions {
  const type = dataSource.options.type;
  if (type !== 'mysql' && type !== 'mariadb') {
    throw new DbLockOptionsError([`DataSource type must be 'mysql' or 'mariadb', got '${String(type)}'`]);
  }
  const driver = dataSource.driver as unknown as {
    options: Record<string, unknown> & { replication?: { master: Record<string, unknown> } };
    createConnectionOptions?: (options: unknown, credentials: unknown) => PoolOptions;
  };
  const options = driver.options;
  const credentials = options.replication?.master ?? options;
  const base: PoolOptions =
    typeof driver.createConnectionOptions === 'function'
      ? driver.createConnectionOptions(options, credentials)
      : {
          host: credentials.host as string | undefined,
          port: credentials.port as number | undefined,
          user: credentials.username as string | undefined,
          password: credentials.password as string | undefined,
          database: credentials.database as string | undefined,
          socketPath: credentials.socketPath as string | undefined,
        };
  return {
    ...base,
    connectionLimit: poolSize,
    multipleStatements: true,
    timezone: 'Z',
    dateStrings: true,
    supportBigNumbers: true,
    bigNumberStrings: true,
    waitForConnections: true,
    queueLimit: 0,
    enableKeepAlive: true,
    queryFormat: literalStatements,
  };
}

/**
 * The library writes its values into its statements itself (sql.ts), and sends none apart. mysql2
 * still scans every statement for placeholders, with no values to put in: a few µs of client work
 * per statement on a grant's path for nothing, and a `?` inside a quoted literal left as it is
 * either way. Values given anyway are formatted as mysql2 would.
 */
function literalStatements(sql: string, values: unknown): string {
  if (values === undefined || (Array.isArray(values) && values.length === 0)) return sql;
  return format(sql, values as never[], false, 'Z');
}
