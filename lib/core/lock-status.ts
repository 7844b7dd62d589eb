/**
 * Log-row statuses. ACQUIRED and COMPLETED are live (the holder still owns the key); the others
 * are terminal.
 * - ACQUIRED: granted, business work may be running.
 * - COMPLETED: a fenced business transaction committed under it; the lock is still held.
 * - RELEASED: given back by its holder. FAILED: given back after the business work failed.
 * - EXPIRED: its lease ran out and another holder (or the janitor) reclaimed it, or (row-lock)
 *   its holder's connection closed before the transaction ended.
 */
export const LockStatus = Object.freeze({
  /** Granted and live. */
  ACQUIRED: 'ACQUIRED',
  /** Live; an outer fenced transaction committed under it. */
  COMPLETED: 'COMPLETED',
  /** Given back by its holder (or force-released). */
  RELEASED: 'RELEASED',
  /** Ended with its holder's work failed (rolled back). */
  FAILED: 'FAILED',
  /** Its lease ran out and another holder or the janitor took it over. */
  EXPIRED: 'EXPIRED',
} as const);
export type LockStatus = (typeof LockStatus)[keyof typeof LockStatus];

/** Terminal statuses a holder ends itself with. */
export type EndStatus = typeof LockStatus.RELEASED | typeof LockStatus.FAILED;
