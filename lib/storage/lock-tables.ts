/** Table names. Fixed: the entities and the migration are declared against them. */
export const LOCK_TABLE = 'db_lock';
export const LOCK_LOG_TABLE = 'db_lock_log';

/**
 * Log-row statuses. ACQUIRED and COMPLETED are live (the holder still owns the key);
 * the others are terminal.
 * - ACQUIRED: granted, business work may be running.
 * - COMPLETED: the fenced business transaction committed (seed 004's status 1); not yet released.
 * - RELEASED: given back by its holder. FAILED: given back after the business work failed.
 * - EXPIRED: its lease ran out and another holder (or the janitor) reclaimed it.
 */
export const LockStatus = Object.freeze({
  ACQUIRED: 'ACQUIRED',
  COMPLETED: 'COMPLETED',
  RELEASED: 'RELEASED',
  FAILED: 'FAILED',
  EXPIRED: 'EXPIRED',
} as const);
export type LockStatus = (typeof LockStatus)[keyof typeof LockStatus];

/** SQL list of the live statuses. */
export const LIVE_STATUSES_SQL = `('${LockStatus.ACQUIRED}', '${LockStatus.COMPLETED}')`;
