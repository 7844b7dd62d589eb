import type { QueryRunner } from 'typeorm';

/** NOWAIT found the row locked (3572), or the wait ran out (1205): the key is held. */
export function isNoWait(error: unknown): boolean {
  const errno = (error as { errno?: number }).errno;
  return errno === 3572 || errno === 1205;
}

/**
 * RowLockStore.cutSession: the runner refuses further queries (TypeORM's released state) and the
 * connection is destroyed, never returned to the pool under running work.
 */
export function cutSession(runner: QueryRunner): void {
  const connection = (runner as unknown as { databaseConnection?: { destroy?: () => void } }).databaseConnection;
  (runner as unknown as { isReleased: boolean }).isReleased = true;
  connection?.destroy?.();
  // TypeORM's own bookkeeping; the destroyed connection is already out of the pool (a no-op there).
  void runner.release().catch(() => undefined);
}
