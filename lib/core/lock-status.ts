/**
 * Log-row statuses. ACQUIRED and COMPLETED are live (the holder still owns the key); the others
 * are terminal.
 * - ACQUIRED: granted, business work may be running.
 * - COMPLETED: a fenced business transaction committed under it; the lock is still held.
 * - RELEASED: given back by its holder. FAILED: given back after the business work failed.
 * - EXPIRED: its lease ran out and another holder (or the janitor) reclaimed it, or (row-lock)
 *   its holder's connection closed before the transaction ended.
 * - CLAIMED: no holder: a row-lock take claimed the key's next token before it locked a key a lease
 *   used last, so that no lease grant can take that token beside it. Ended as written.
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
  /** A token claimed by a row-lock take (no holder; terminal as written). */
  CLAIMED: 'CLAIMED',
} as const);
export type LockStatus = (typeof LockStatus)[keyof typeof LockStatus];

/** Terminal statuses a holder ends itself with. */
export type EndStatus = typeof LockStatus.RELEASED | typeof LockStatus.FAILED;
