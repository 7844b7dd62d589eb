import type { QueryRunner } from 'typeorm';
import type { PoolConnection } from 'mysql2';
import { ANSWER_BOUND_MS } from './lock-connection-pool.js';
import { cutSession } from './row-lock-session.js';
import { sendBounded } from './bounded-statement.js';

/** What mysql2 hands back: rows for a read, a result header for a write. */
export interface ResultHeader {
  readonly affectedRows: number;
  readonly insertId: number | string;
}

/**
 * One of the library's own statements on a business transaction's connection (the row-lock's
 * locking statement and audit rows, the fence), sent straight to mysql2's callback API. TypeORM's
 * wrapper around a statement (its logger, query events, a copy of the result and, through mysql2's
 * promise API, a captured stack trace) costs about 35 µs of client work per statement: a tenth of
 * a row-lock hold. START and COMMIT go this way too unless someone listens to TypeORM's
 * transaction events (see MysqlSessionTransactions). A released runner refuses as TypeORM does.
 * @param answerBy performance.now() past which the client stops waiting (the fence and COMMIT:
 *   ANSWER_BOUND_MS): the session is cut (its connection never reused, the server rolls back
 *   whatever it had not committed) and LockStatementError('deadline') thrown, outcome unknown.
 */
export function sessionQuery<T = unknown>(runner: QueryRunner, sql: string, answerBy = Infinity): Promise<T> {
  const connection = (runner as unknown as { databaseConnection?: PoolConnection }).databaseConnection;
  if (runner.isReleased || typeof connection?.query !== 'function') return runner.query(sql) as Promise<T>;
  return new Promise<T>((resolve, reject) =>
    sendBounded(connection, sql, answerBy, (failure, result) => {
      if (!failure) return resolve(result as T);
      // The driver's own error, as callers test its errno; past the bound, the runner's bookkeeping too.
      if (failure.kind !== 'deadline') return reject(failure.driverError);
      cutSession(runner);
      reject(failure);
    }),
  );
}

/** The bound on the answer of a statement that ends a business transaction (the fence, COMMIT). */
export function commitAnswerBy(): number {
  return performance.now() + ANSWER_BOUND_MS;
}
