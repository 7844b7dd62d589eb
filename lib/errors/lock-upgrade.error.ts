import { DbLockError } from './db-lock.error.js';

/**
 * A call chain that holds a read lock asked for a write lock on the same key. Waiting would
 * deadlock against itself, so it is refused at once. Take the write lock from the start.
 */
export class LockUpgradeError extends DbLockError {
  constructor(
    /** The key held for reading and asked for writing. */
    readonly key: string,
  ) {
    super(
      `Cannot upgrade the read lock on '${key}' held by this call chain to a write lock: ` +
        `it would wait for itself. Take the write lock in the outer call instead.`,
    );
  }
}
