import { toTypedError } from '../errors/to-typed-error.js';
import type { LockStrategy } from '../strategies/lock-strategy.js';
import type { HeldLock } from './held-lock.js';
import { LockStatus } from './lock-status.js';
import type { Waiter } from './wait-queue.js';

/**
 * One try of `strategy` for `waiter`: the lock, or undefined (why is kept on the waiter). A grant
 * that lands while the service shuts down is handed straight back rather than left to expire.
 */
export async function tryOnce(
  strategy: LockStrategy,
  waiter: Waiter<HeldLock>,
  closing: () => boolean,
): Promise<{ lock: HeldLock; reclaimed: number } | undefined> {
  let result;
  try {
    result = await strategy.tryGrant({ ...waiter, tries: waiter.tries, refusals: waiter.refusals });
  } catch (error) {
    throw toTypedError(error, `Lock statement for ${waiter.targets.map((t) => `'${t.key}'`).join(', ')} failed`);
  }
  if (!result.lock) {
    waiter.lastFailure = result.failure;
    return undefined;
  }
  waiter.lastFailure = undefined;
  if (closing()) {
    await strategy.release(result.lock, LockStatus.RELEASED, 'granted during shutdown').catch(() => undefined);
    return undefined;
  }
  return { lock: result.lock, reclaimed: result.reclaimed };
}
