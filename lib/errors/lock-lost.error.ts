import { DbLockError } from './db-lock.error.js';

/**
 * The holder no longer owns the lock: its lease ran out and another holder took the key over,
 * or an operator force-released it. Thrown by `release()`/`extend()` of a stale handle and by
 * a fenced transaction that must not commit. It never means a newer holder was disturbed.
 */
export class LockLostError extends DbLockError {
  constructor(
    /** The (first) key of the lost lock, as the caller wrote it. */
    readonly key: string,
    /** The fencing token the stale holder was granted. */
    readonly fencingToken: number,
    /** How it was lost. */
    readonly reason: string,
    options?: { cause?: unknown },
  ) {
    super(`Lock on '${key}' (fencing token ${fencingToken}) was lost: ${reason}`, options);
  }
}
