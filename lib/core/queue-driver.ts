import type { Logger } from '@nestjs/common';
import { LockTimeoutError } from '../errors/lock-timeout.error.js';
import { waitFailure } from '../errors/wait-failure.js';
import type { LockStrategy } from '../strategies/lock-strategy.js';
import type { LeaseKeeper } from './acquire-request.js';
import type { HeldLock } from './held-lock.js';
import type { LocalHolds } from './local-holds.js';
import type { LockTarget } from './lock-key.js';
import type { LockObserver } from './lock-observer.js';
import { tryOnce } from './try-once.js';
import type { Waiter, WaitQueueDriver } from './wait-queue.js';

/** What a strategy's queue driver needs from the runtime that owns the queues. */
export interface QueueDriverHost {
  readonly localHolds: LocalHolds;
  readonly keeper: LeaseKeeper;
  readonly observer: LockObserver;
  readonly logger: Pick<Logger, 'warn'>;
  /** Tries on the wire: shutdown waits for them before connections close. */
  readonly inFlight: Set<Promise<unknown>>;
  /** True while a write waiter of this process waits on one of the keys. */
  writerWaits(targets: readonly LockTarget[]): boolean;
  closing(): boolean;
  release(lock: HeldLock, failed: boolean): Promise<void>;
}

/** A strategy's queue driver, plus the step a grant made outside the queues (inside an open transaction) goes through too. */
export interface QueueDriver extends WaitQueueDriver<HeldLock> {
  /** A fresh grant joins this process's bookkeeping. */
  adopt(lock: HeldLock, startedAt: number, reclaimed: number, name: string): HeldLock;
}

/**
 * How the wait queues drive one strategy: its tries (tracked while on the wire), whether a local
 * holder blocks a waiter, its back-off, the typed timeout, and giving back a grant nobody wants.
 * A grant joins the process's bookkeeping here (local holds, the lease keeper, the observer).
 */
export function queueDriver(strategy: LockStrategy, host: QueueDriverHost): QueueDriver {
  const adopt = (lock: HeldLock, startedAt: number, reclaimed: number, name: string): HeldLock => {
    lock.name = name;
    host.localHolds.add(lock);
    if (strategy.capabilities.renewedByProcessLease) host.keeper.add(lock);
    host.observer.acquired(lock, lock.grantedAt - startedAt, reclaimed);
    return lock;
  };
  const attempt = (waiter: Waiter<HeldLock>): Promise<HeldLock | undefined> =>
    tryOnce(strategy, waiter, host.closing, (lock, reclaimed) => adopt(lock, waiter.startedAt, reclaimed, waiter.name));
  return {
    adopt,
    attempt: (waiter) => {
      const running = attempt(waiter);
      host.inFlight.add(running);
      const done = (): void => void host.inFlight.delete(running);
      running.then(done, done);
      return running;
    },
    blockedLocally: (waiter, askHolders) =>
      (!askHolders && host.localHolds.blocks(waiter.targets, (lock) => strategy.waitsForLocalRelease(lock))) ||
      // A permit asked with another limit than the live local permits' is not held back: its try gets SemaphoreLimitError at once.
      (strategy.readersYieldToLocalWriters === true &&
        waiter.mode === 'read' &&
        host.writerWaits(waiter.targets) &&
        !host.localHolds.otherLimit(waiter.targets)),
    delay: (failedTries) => strategy.retryDelay(failedTries),
    timeoutError: (waiter) => {
      const error = waitFailure(waiter);
      if (error instanceof LockTimeoutError && !waiter.internal && !waiter.quietTimeout)
        host.observer.timedOut(error.keys, waiter.mode, error.waitedMs, waiter);
      return error;
    },
    discard: (lock) => {
      host.release(lock, false).catch((e: unknown) => host.logger.warn(`Could not give back an unwanted grant: ${String(e)}`));
    },
  };
}
