import { LockLostError } from '../errors/lock-lost.error.js';
import type { HeldLock } from './held-lock.js';

/**
 * What the caller of a fenced call hears after its transaction was rolled back. If a lock under
 * the work was lost meanwhile (a row-lock holder's connection died, a lease ran out), that loss
 * is why: the work's next statement found the connection gone, or the server rolled its
 * transaction back. The caller hears LockLostError, the failure kept as `cause`, rather than a
 * driver or ORM error, or the library's own (a manager already closed), that does not say the
 * lock is gone. Once the database rolled the transaction back itself, that is the failure, whatever
 * the work did after (`error` may then be undefined: the work succeeded, having caught the rollback).
 * @param locks the locks the transaction fenced: those ending with it first.
 * @param rolledBackBy the statement failure with which the database rolled the transaction back, if it did.
 */
export function rollbackCause(error: unknown, locks: readonly HeldLock[], rolledBackBy: { error: unknown } | undefined): unknown {
  if (error instanceof LockLostError) return error;
  if (rolledBackBy) return lostByRollback(locks[0]!, rolledBackBy.error);
  const lost = locks.find((lock) => !lock.live && lock.signal.reason instanceof LockLostError);
  if (!lost) return error;
  const reason = lost.signal.reason as LockLostError;
  return new LockLostError(lost.keys[0]!, lost.fencingToken, `${reason.reason}; the locked work failed after that and was rolled back`, {
    cause: error,
  });
}

/** The call's failure once the database rolled its transaction back, whatever the work did after (its cause: the database's error). */
function lostByRollback(lock: HeldLock, cause: unknown): LockLostError {
  const reason = 'the database rolled back the transaction its locked work ran in (a deadlock); nothing of that work commits';
  return new LockLostError(lock.keys[0]!, lock.fencingToken, reason, { cause });
}
