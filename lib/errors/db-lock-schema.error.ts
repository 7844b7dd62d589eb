import { DbLockError } from './db-lock.error.js';

/** The lock tables are missing or unreadable. Raised at bootstrap, before any lock is used. */
export class DbLockSchemaError extends DbLockError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}
