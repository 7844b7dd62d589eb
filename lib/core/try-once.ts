import { toTypedError } from '../errors/to-typed-error.js';
import type { LockStrategy } from '../strategies/lock-strategy.js';
import type { HeldLock } from './held-lock.js';
import { LockStatus } from './lock-status.js';
import type { Waiter } from './wait-queue.js';

/**
 * One try of `strategy` for `waiter`: the lock as `adopt` returns it, or undefined (why is kept on
 * the waiter). A grant that lands while the service shuts down is handed straight back rather than
 * left to expire. `adopt` runs in the same handler as the answer: a handler per layer would cost
 * every acquisition a microtask hop more.
 */
export function tryOnce(
  strategy: LockStrategy,
  waiter: Waiter<HeldLock>,
  closing: () => boolean,
  adopt: (lock: HeldLock, reclaimed: number) => HeldLock,
): Promise<HeldLock | undefined> {
  let granting: ReturnType<LockStrategy['tryGrant']>;
  try {
    granting = strategy.tryGrant(waiter); // read, never kept: the queue moves `tries` on only after this try settles
  } catch (error) {
    return Promise.reject(typedFailure(error, waiter));
  }
  return granting.then(
    (result) => {
      if (!result.lock) {
        waiter.lastFailure = result.failure;
        return undefined;
      }
      waiter.lastFailure = undefined;
      if (!closing()) return adopt(result.lock, result.reclaimed);
      return strategy.release(result.lock, LockStatus.RELEASED, 'granted during shutdown').then(nothing, nothing);
    },
    (error: unknown) => {
      throw typedFailure(error, waiter);
    },
  );
}

const nothing = (): undefined => undefined;

function typedFailure(error: unknown, waiter: Waiter<HeldLock>): Error {
  return toTypedError(error, `Lock statement for ${waiter.targets.map((t) => `'${t.key}'`).join(', ')} failed`);
}
