import type { Waiter } from '../core/wait-queue.js';
import { LockStatementError } from '../store/lock-statement.error.js';
import { LockTimeoutError } from './lock-timeout.error.js';
import { toTypedError } from './to-typed-error.js';

/**
 * The error of a waiter whose budget ran out: a connection error when the database could not be
 * reached (or the connection broke) on its last try, else LockTimeoutError. An interrupted or
 * timed-out statement is a timeout.
 */
export function waitFailure(waiter: Waiter<unknown>): Error {
  const waitedMs = performance.now() - waiter.startedAt;
  const keys = waiter.targets.map((t) => t.key);
  const failure = waiter.lastFailure instanceof LockStatementError ? waiter.lastFailure : undefined;
  if (failure && (failure.kind === 'unreachable' || failure.kind === 'connection-lost'))
    return toTypedError(failure, `No lock on ${keys.map((k) => `'${k}'`).join(', ')}`);
  const timeoutMs = waiter.deadline === Infinity ? Infinity : Math.round(waiter.deadline - waiter.startedAt);
  return new LockTimeoutError(keys, waiter.mode, waitedMs, timeoutMs, failure ? { cause: failure.driverError } : undefined);
}
