import type { PoolConnection } from 'mysql2';
import { deadlines } from '../../core/deadline-watch.js';
import { LockStatementError } from '../lock-statement.error.js';
import { closeUnderWork } from './close-under-work.js';

/** Called once with a statement's answer: the typed failure, or the driver's result. */
export type StatementDone = (error: LockStatementError | undefined, result?: unknown) => void;

/**
 * One statement on `connection`, answered through `done` (in mysql2's callback: no promise of its
 * own). Past `deadline` (performance.now(); Infinity: never) the client stops waiting: the
 * connection is closed under the statement and `done` gets LockStatementError('deadline').
 */
export function sendBounded(connection: PoolConnection, sql: string, deadline: number, done: StatementDone): void {
  let settled = false;
  const watched =
    deadline === Infinity
      ? undefined
      : deadlines.watch(deadline, () => {
          if (settled) return;
          settled = true;
          // Never reused: it may still be running the statement on the server. Closed under
          // work, so statements queued behind it on this connection fail now, not when it ends.
          closeUnderWork(connection);
          done(LockStatementError.deadline('The lock statement did not answer before the deadline'));
        });
  connection.query(sql, (error, result) => {
    watched?.cancel();
    if (settled) return;
    settled = true;
    done(error ? LockStatementError.from(error) : undefined, result);
  });
}

/** After a failure: a broken connection is destroyed; an open transaction is rolled back first; else it goes back to its pool. */
export async function recoverConnection(connection: PoolConnection, error: unknown, inTransaction: boolean): Promise<void> {
  const failure = error === undefined ? undefined : LockStatementError.from(error);
  if (failure?.kind === 'deadline') return; // already destroyed
  if (failure && (failure.kind === 'connection-lost' || failure.kind === 'unreachable')) {
    connection.destroy();
    return;
  }
  if (!inTransaction) {
    connection.release();
    return;
  }
  await new Promise<void>((resolve) => {
    connection.query('ROLLBACK', (rollbackError) => {
      if (rollbackError) connection.destroy();
      else connection.release();
      resolve();
    });
  });
}
