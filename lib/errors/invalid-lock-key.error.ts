import { DbLockError } from './db-lock.error.js';

/** A key that cannot name a lock. Thrown before any SQL runs. */
export class InvalidLockKeyError extends DbLockError {
  constructor(
    /** The rejected value, as given. */
    readonly key: unknown,
    /** Why the key was refused. */
    readonly reason: string,
  ) {
    super(`Invalid lock key ${describe(key)}: ${reason}`);
  }
}

function describe(value: unknown): string {
  if (typeof value === 'string') {
    return value.length > 40 ? `'${value.slice(0, 40)}…' (${value.length} chars)` : `'${value}'`;
  }
  if (Array.isArray(value)) return 'array';
  if (value === null) return 'null';
  return typeof value;
}
