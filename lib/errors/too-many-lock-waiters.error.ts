import { DbLockError } from './db-lock.error.js';

/**
 * A row-lock acquisition was refused at once because `maxRowLockWaiters` callers of this process
 * already queue for a connection of the DataSource (only when that option is set: by default
 * callers queue within their timeoutMs, however many they are).
 */
export class TooManyLockWaitersError extends DbLockError {
  constructor(
    /** The keys asked for. */
    readonly keys: readonly string[],
    /** The bound that was reached (queued callers). */
    readonly limit: number,
    /** How many were queued. */
    readonly reason: string,
  ) {
    super(`Row-lock on ${keys.map((k) => `'${k}'`).join(', ')} refused: ${reason} (limit ${limit}); raise maxRowLockWaiters or the DataSource pool`);
  }
}
