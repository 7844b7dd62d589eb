import { LockStatementError } from '../store/lock-statement.error.js';
import { DbLockConnectionError } from './db-lock-connection.error.js';
import { DbLockError } from './db-lock.error.js';
import { DbLockSchemaError } from './db-lock-schema.error.js';

/** Turns whatever a store statement threw into a public, typed error (the driver's error as `cause`). */
export function toTypedError(error: unknown, context: string): Error {
  if (error instanceof DbLockError) return error;
  const failure = LockStatementError.from(error);
  const cause = failure.driverError;
  const detail = cause instanceof Error ? cause.message : String(cause);
  switch (failure.kind) {
    case 'unreachable':
      return new DbLockConnectionError(`${context}: the database could not be reached (${detail})`, 'unreachable', { cause });
    case 'connection-lost':
    case 'deadline':
      return new DbLockConnectionError(
        `${context}: the connection broke mid-statement; anything it may have granted was given back (${detail})`,
        'connection-lost',
        { cause },
      );
    case 'interrupted':
      return new DbLockConnectionError(`${context}: the statement was interrupted on the server (${detail})`, 'interrupted', { cause });
    case 'denied':
      return new DbLockConnectionError(`${context}: the database refused the library's user (${detail})`, 'denied', { cause });
    case 'schema':
      return new DbLockSchemaError(
        `${context}: the lock tables are missing or out of date; run the library's migrations (DB_LOCK_MIGRATIONS) (${detail})`,
        { cause },
      );
    case 'read-only':
      return new DbLockConnectionError(`${context}: the server is read-only (a replica?); locks need the primary (${detail})`, 'read-only', {
        cause,
      });
    default:
      return new DbLockConnectionError(`${context}: unexpected database error (${detail})`, 'unexpected', { cause });
  }
}
