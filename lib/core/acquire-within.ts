import { setTimeout as sleep } from 'node:timers/promises';
import { DbLockError } from '../errors/db-lock.error.js';
import type { AttemptResult, GrantAttempt } from '../strategies/lock-strategy.js';
import type { FreshWaiter } from './acquire-request.js';
import type { HeldLock } from './held-lock.js';
import type { QueueDriver } from './queue-driver.js';
import type { Waiter } from './wait-queue.js';

/**
 * Takes the keys inside the chain's open fenced transaction, on its connection (strategies that
 * `joinsOpenTransaction`). A take that is refused at once (a live lease holder of the key) is
 * tried again after the strategy's pause, as a queued caller would be, until the caller's budget or
 * tries run out; one that waited in the database until the deadline is not. No local queue: the
 * transaction's connection is the caller's own, and nothing else of this chain can use it meanwhile.
 */
export async function takeWithin(
  grantWithin: (attempt: GrantAttempt) => Promise<AttemptResult>,
  driver: QueueDriver,
  waiter: FreshWaiter,
  host: { closing(): boolean; counted(delta: number): void },
  settled: <T>(verdict: T) => T,
): Promise<HeldLock> {
  // Waiting like any caller (stats().waiting, the waiting gauge) until its verdict.
  host.counted(1);
  try {
    return settled(await tries(grantWithin, driver, waiter, host.closing));
  } catch (error) {
    throw settled(error);
  } finally {
    host.counted(-1);
  }
}

async function tries(
  grantWithin: (attempt: GrantAttempt) => Promise<AttemptResult>,
  driver: QueueDriver,
  waiter: FreshWaiter,
  closing: () => boolean,
): Promise<HeldLock> {
  const tracked = waiter as Waiter<HeldLock>;
  for (;;) {
    const result = await grantWithin(tracked);
    tracked.tries++;
    if (result.lock) return driver.adopt(result.lock, waiter.startedAt, result.reclaimed, waiter.name);
    tracked.lastFailure = result.failure;
    if (result.failure === undefined) tracked.refusals++;
    if (closing()) throw new DbLockError('The lock service shut down while this caller was waiting');
    const pause = driver.delay(tracked.tries);
    if (tracked.tries >= waiter.maxAttempts || performance.now() + pause >= waiter.deadline) throw driver.timeoutError(tracked);
    await sleep(pause);
  }
}
