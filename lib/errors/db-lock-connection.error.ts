import { DbLockError } from './db-lock.error.js';

/**
 * The database could not be reached, refused the library (credentials, read-only server), or a
 * lock statement's connection broke and the wait budget ran out before a retry could succeed.
 * Whatever the failed statement may have granted was given back: the caller holds nothing.
 * `cause` is the driver's error; `reason` says which case it was.
 */
export class DbLockConnectionError extends DbLockError {
  constructor(
    message: string,
    /** What went wrong: the server unreachable, the connection lost, the statement interrupted, access denied, a read-only server, or an unexpected failure. */
    readonly reason: 'unreachable' | 'connection-lost' | 'interrupted' | 'denied' | 'read-only' | 'unexpected',
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}
