import { LockTimeoutError } from '../errors/lock-timeout.error.js';
import type { LockHandle } from './lock-handle.js';

/**
 * `onLocked: 'skip'`: the call resolves undefined, rather than reject, when it timed out before its
 * work started, waiting for the lock or for its transaction's connection. A timeout the work itself
 * meets (a nested lock) is the work's failure and is rethrown.
 */
export function skipIfLocked<T>(
  granted: Promise<LockHandle>,
  fn: (lock: LockHandle) => Promise<T> | T,
  run: (handle: LockHandle, work: (lock: LockHandle) => Promise<T> | T) => Promise<T>,
  dropEarly: () => void,
  onSkipped: (error: LockTimeoutError) => void,
): Promise<T | undefined> {
  let started = false;
  const work = (lock: LockHandle) => {
    started = true;
    return fn(lock);
  };
  const skipped = (error: unknown): undefined => {
    if (started || !(error instanceof LockTimeoutError)) throw error;
    onSkipped(error);
    return undefined;
  };
  return granted.then(
    (handle) => run(handle, work).catch(skipped),
    (error: unknown) => {
      dropEarly();
      return skipped(error);
    },
  );
}
