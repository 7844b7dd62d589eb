import type { QueryRunner } from 'typeorm';

/** What the row-lock strategy does with the transaction (the session) a lock lives in. */

/** NOWAIT found the row locked (3572), or the wait ran out (1205): the key is held. */
export function isNoWait(error: unknown): boolean {
  const errno = (error as { errno?: number }).errno;
  return errno === 3572 || errno === 1205;
}

/**
 * Ends a transaction whose work may still be sending statements: the runner refuses every further
 * query at once (TypeORM's released state), and the connection is destroyed, so the server rolls
 * the transaction back and any statement already queued on it fails. A ROLLBACK instead would let
 * a statement sent after it run in autocommit, and returning the connection to the pool with the
 * work still running would hand it to someone else.
 */
export function abandon(runner: QueryRunner): void {
  const connection = (runner as unknown as { databaseConnection?: { destroy?: () => void } }).databaseConnection;
  (runner as unknown as { isReleased: boolean }).isReleased = true;
  connection?.destroy?.();
  // TypeORM's own bookkeeping; the destroyed connection is already out of the pool (a no-op there).
  void runner.release().catch(() => undefined);
}

/** Rolls back if a transaction is open and returns the connection; the server rolls back a broken one itself. */
export async function endQuietly(runner: QueryRunner): Promise<void> {
  if (runner.isTransactionActive) await runner.rollbackTransaction().catch(() => undefined);
  await runner.release().catch(() => undefined);
}
