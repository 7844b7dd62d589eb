import { DbLockError } from './db-lock.error.js';

/**
 * A row-lock acquisition was refused at once because `maxRowLockWaiters` acquisitions of this
 * process already wait in the database (each on a connection of the DataSource's pool), or
 * because taking one more connection would leave the pool without a free one. Failing fast keeps
 * the pool for the holders, so the process can never deadlock against its own pool.
 */
export class TooManyLockWaitersError extends DbLockError {
  constructor(
    /** The keys asked for. */
    readonly keys: readonly string[],
    /** The bound that was reached (waiters, or connections of the DataSource). */
    readonly limit: number,
    /** Which bound, and how many were in use. */
    readonly reason: string,
  ) {
    super(`Row-lock on ${keys.map((k) => `'${k}'`).join(', ')} refused: ${reason} (limit ${limit}); size the DataSource pool or maxRowLockWaiters for it`);
  }
}
