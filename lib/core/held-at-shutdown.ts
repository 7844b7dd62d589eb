import type { Logger } from '@nestjs/common';
import { LockLostError } from '../errors/lock-lost.error.js';
import type { LockStrategy } from '../strategies/lock-strategy.js';
import type { LockStrategyName } from '../strategies/lock-strategy-name.js';
import type { HeldLock } from './held-lock.js';
import type { LocalHolds } from './local-holds.js';
import type { LockObserver } from './lock-observer.js';
import { type EndStatus, LockStatus } from './lock-status.js';

/** Locks whose signal shutdown aborted: their rows end as shutdown ends them, whoever releases first. */
const abortedAtShutdown = new WeakSet<HeldLock>();

/** Aborts the signal of every lock still held (about to be ended at shutdown). Returns how many user locks it aborted. */
export function abortHeld(holds: LocalHolds, observer: LockObserver, reason: string): number {
  let aborted = 0;
  for (const lock of holds.all()) {
    if (!lock.live) continue;
    const error = new LockLostError(lock.keys[0]!, lock.fencingToken, reason);
    abortedAtShutdown.add(lock);
    lock.markLost(error);
    if (lock.internal) continue;
    aborted++;
    observer.lost(lock, error);
  }
  return aborted;
}

/**
 * Ends every lock still held, then `forget`s it. One whose signal shutdown aborted while its work
 * may still run is given up rather than released: a lock that is its transaction is then rolled
 * back, never committed under the running work.
 */
export async function endHeld(
  holds: LocalHolds,
  strategyOf: (name: LockStrategyName) => LockStrategy,
  logger: Pick<Logger, 'warn'>,
  forget: (lock: HeldLock) => void,
): Promise<void> {
  const held = holds.held();
  await Promise.allSettled(
    held.map((lock) => {
      const strategy = strategyOf(lock.strategy);
      return strategy
        .release(lock, ...shutdownEnding(lock, strategy))
        .catch((e: unknown) => (e instanceof LockLostError ? undefined : logger.warn(`Release at shutdown failed: ${String(e)}`)));
    }),
  );
  for (const lock of held) forget(lock);
}

/**
 * How shutdown ends a lock's rows. Released, whether shutdown or the holder's own `release()` (its
 * work saw the aborted signal) gets there first; but a lock that is its transaction, aborted while
 * its work may still run, is given up: rolled back, never committed under that work.
 */
export function shutdownEnding(lock: HeldLock, strategy: LockStrategy): [EndStatus | typeof LockStatus.EXPIRED, string] {
  return !lock.live && strategy.capabilities.heldByOpenTransaction
    ? [LockStatus.EXPIRED, 'given up at shutdown']
    : [LockStatus.RELEASED, 'released at shutdown'];
}

/** Whether shutdown aborted this lock (rather than a loss of its own). */
export function abortedByShutdown(lock: HeldLock): boolean {
  return abortedAtShutdown.has(lock);
}
