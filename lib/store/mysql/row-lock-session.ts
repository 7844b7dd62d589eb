import type { QueryRunner } from 'typeorm';
import { closeUnderWork } from './close-under-work.js';

/** NOWAIT found the row locked (3572), or the wait ran out (1205): the key is held. */
export function isNoWait(error: unknown): boolean {
  const errno = (error as { errno?: number }).errno;
  return errno === 3572 || errno === 1205;
}

/**
 * RowLockStore.cutSession: the runner refuses further queries (TypeORM's released state) and the
 * connection is closed, never returned to the pool under running work; a statement the work has
 * in flight on it fails (see closeUnderWork).
 */
export function cutSession(runner: QueryRunner): void {
  const connection = (runner as unknown as { databaseConnection?: { _removeFromPool?: () => void } }).databaseConnection;
  (runner as unknown as { isReleased: boolean }).isReleased = true;
  // Out of the pool first: mysql2 drops a connection only when its socket's close arrives, and a
  // release before that would hand the dead connection to the next caller queued for one.
  connection?._removeFromPool?.();
  // The work may be awaiting a statement on this very connection: it must fail, not hang.
  closeUnderWork(connection);
  // TypeORM's own bookkeeping; the destroyed connection is already out of the pool (a no-op there).
  void runner.release().catch(() => undefined);
}
