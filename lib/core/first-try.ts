import { DbLockError } from '../errors/db-lock.error.js';
import type { AcquireRequest, FreshWaiter } from './acquire-request.js';
import type { HeldLock } from './held-lock.js';
import type { Waiter } from './wait-queue.js';

/** What the first try needs from the runtime: one object per runtime, the request passed in (no closures per acquisition). */
export interface FirstTryHost {
  /** The try would wait in the database before it asks (a doorbell): it goes from the local queue instead. */
  waitsAtOnce(request: AcquireRequest): boolean;
  /** One try, tracked while on the wire (the queue driver's). */
  attempt(request: AcquireRequest, waiter: Waiter<HeldLock>): Promise<HeldLock | undefined>;
  /** Counts callers in a first try as waiting (`stats().waiting`). */
  counted(delta: 1 | -1): void;
  closing(): boolean;
  /** The local wait queue that takes over after a try that did not grant. */
  queued(request: AcquireRequest, waiter: FreshWaiter, settled: <T>(verdict: T) => T): Promise<HeldLock>;
}

/**
 * A caller's first try goes straight out: building a local wait queue for it first (with its
 * poller and timer) costs client work on every acquisition, and most first tries grant. The queue
 * is built only when that try did not grant, and takes over with the try counted (its back-off,
 * maxAttempts and deadline apply as for any waiter). The runtime queues at once instead when a
 * local caller already waits for the keys or a local holder blocks them, unless the strategy
 * queues its callers in the server (row-lock: the locking statement itself waits there, so asking
 * is waiting). A try that would wait on a doorbell before it asks goes from the local queue too,
 * its caller told first: the server's queue then holds one waiter of this process, and the
 * process's other callers of the keys wait behind it here. Side by side, first tries waiting there
 * would each take a place in the server's queue, and one process's callers would follow each other.
 */
export function firstTryBeforeQueue(
  request: AcquireRequest,
  waiter: FreshWaiter,
  settled: <T>(verdict: T) => T,
  host: FirstTryHost,
): Promise<HeldLock> {
  if (host.waitsAtOnce(request)) {
    request.onWaiting?.();
    return host.queued(request, waiter, settled);
  }
  host.counted(1);
  let trying: Promise<HeldLock | undefined>;
  try {
    // A try reads the waiter's state only; a queue settles waiters, never a try.
    trying = host.attempt(request, waiter as Waiter<HeldLock>);
  } catch (error) {
    host.counted(-1);
    return Promise.reject(settled(error));
  }
  // Handlers, not an async frame: the first try is on every acquisition's path.
  return trying.then(
    (granted) => {
      host.counted(-1);
      if (granted) return settled(granted);
      waiter.tries++;
      if (waiter.lastFailure === undefined) waiter.refusals++;
      request.onWaiting?.();
      if (host.closing()) throw settled(new DbLockError('The lock service shut down while this caller was waiting'));
      return host.queued(request, waiter, settled);
    },
    (error: unknown) => {
      host.counted(-1);
      throw settled(error);
    },
  );
}
