import { DbLockError } from './db-lock.error.js';

/**
 * A semaphore was asked for with a limit other than the one its key is in use with: by live
 * permits in the database (the key row's limit), or by the caller's own call chain. Also raised
 * when a call chain that holds the key as a lock asks for a permit of it, or the reverse: that
 * would wait for itself. Nothing was written.
 */
export class SemaphoreLimitError extends DbLockError {
  constructor(
    /** The semaphore's key (without the namespace). */
    readonly key: string,
    /** The limit this caller named; null when it asked for a lock. */
    readonly limit: number | null,
    /** The limit the key is in use with; null when it is held as a lock. */
    readonly currentLimit: number | null,
  ) {
    super(
      currentLimit === null
        ? `'${key}' is held as a lock by this call chain: it cannot take a permit of it too (it would wait for itself)`
        : limit === null
          ? `'${key}' is held as a semaphore (limit ${currentLimit}) by this call chain: it cannot lock the key too (it would wait for itself)`
          : `Semaphore '${key}' is in use with limit ${currentLimit}, asked with limit ${limit}: every caller of a key must name the same limit ` +
            `(a new limit is adopted once no permit of the key is live)`,
    );
  }
}
