import type { QueryRunner } from 'typeorm';

/** What mysql2 hands back: rows for a read, a result header for a write. */
export interface ResultHeader {
  readonly affectedRows: number;
  readonly insertId: number | string;
}

interface CallbackConnection {
  query(sql: string, callback: (error: unknown, result: unknown) => void): unknown;
}

/**
 * One of the library's own statements on a business transaction's connection (the row-lock's
 * locking statement and audit rows, the fence), sent straight to mysql2's callback API. TypeORM's
 * wrapper around a statement (its logger, query events, a copy of the result and, through mysql2's
 * promise API, a captured stack trace) costs about 35 µs of client work per statement: a tenth of
 * a row-lock hold. START and COMMIT go this way too unless someone listens to TypeORM's
 * transaction events (see MysqlSessionTransactions). A released runner refuses as TypeORM does.
 */
export function sessionQuery<T = unknown>(runner: QueryRunner, sql: string): Promise<T> {
  const connection = (runner as unknown as { databaseConnection?: CallbackConnection }).databaseConnection;
  if (runner.isReleased || typeof connection?.query !== 'function') return runner.query(sql) as Promise<T>;
  return new Promise<T>((resolve, reject) => {
    connection.query(sql, (error, result) => (error ? reject(error) : resolve(result as T)));
  });
}
