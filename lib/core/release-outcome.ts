import { LockLostError } from '../errors/lock-lost.error.js';
import { toTypedError } from '../errors/to-typed-error.js';
import type { HeldLock } from './held-lock.js';
import type { LockObserver } from './lock-observer.js';
import type { LockStrategy } from '../strategies/lock-strategy.js';
import { abortedByShutdown, shutdownEnding } from './held-at-shutdown.js';
import { type EndStatus, LockStatus } from './lock-status.js';

/** After the strategy ended the lock: released, or the loss the caller must still learn of. */
export function settleRelease(lock: HeldLock, wasLost: boolean, observer: LockObserver, startedAt: number): void {
  // Nothing was left to end (a row-lock abandoned at maxHoldMs), but the caller must still learn it was lost.
  if (wasLost && lock.signal.reason instanceof LockLostError) {
    lock.markLost(lock.signal.reason);
    throw lock.signal.reason;
  }
  lock.markReleased();
  observer.released(lock, performance.now() - startedAt);
}

/** A release that failed: the lock counts as lost (taken over, or left to its lease), with the typed error to throw. */
export function releaseFailure(lock: HeldLock, wasLost: boolean, observer: LockObserver, error: unknown): Error {
  if (error instanceof LockLostError) {
    if (!wasLost) observer.lost(lock, error);
    lock.markLost(error);
    return error;
  }
  // Already lost (at shutdown the pool may be closing under it): the caller hears why, not what its release met.
  if (wasLost && lock.signal.reason instanceof LockLostError) {
    lock.markLost(lock.signal.reason);
    return lock.signal.reason;
  }
  const typed = toTypedError(
    error,
    `Releasing ${lock.mode} lock on ${lock.keys.map((k) => `'${k}'`).join(', ')} failed; its lease will run out on its own`,
  );
  // Lost to its holder from now on: counted and reported as any loss (the held gauge comes back down).
  if (!wasLost) observer.lost(lock, typed);
  lock.markLost(typed);
  return typed;
}

/** Why a lock can no longer be extended: the loss its signal carries, or its end. */
export function lostOrEnded(lock: HeldLock): LockLostError {
  const reason: unknown = lock.signal.reason;
  return reason instanceof LockLostError
    ? reason
    : new LockLostError(lock.keys[0]!, lock.fencingToken, `it was already ${lock.state}; it cannot be extended`);
}

/** The note on the rows of a lock its holder gave up (lost from its own side). */
export function givenUpNote(lock: HeldLock): string {
  const reason: unknown = lock.signal.reason;
  return `given up by its holder: ${reason instanceof LockLostError ? reason.reason : String(reason)}`.slice(0, 255);
}

/**
 * The status (and note) a release writes on the lock's rows. A lock lost from its own side ends as
 * its give-back ends it, whichever lands first, never RELEASED; one shutdown aborted ends as
 * shutdown ends it, whichever of the two releases lands first.
 */
export function rowsEnding(
  lock: HeldLock,
  strategy: LockStrategy,
  wasLost: boolean,
  failed: boolean,
): [EndStatus | typeof LockStatus.EXPIRED, string | undefined] {
  if (wasLost && abortedByShutdown(lock)) return shutdownEnding(lock, strategy);
  if (wasLost) return [LockStatus.EXPIRED, givenUpNote(lock)];
  return [failed ? LockStatus.FAILED : LockStatus.RELEASED, undefined];
}
