import type { HeldLock } from '../core/held-lock.js';
import type { LeaseKeeper } from '../core/acquire-request.js';
import { LockLostError } from '../errors/lock-lost.error.js';

/**
 * The testing module's stand-in for the watchdog: there is no lease to renew in memory, so it
 * only gives up locks held longer than maxHoldMs, as the watchdog does (signal aborted, key freed).
 */
export class InMemoryKeeper implements LeaseKeeper {
  private readonly timers = new Map<HeldLock, NodeJS.Timeout>();

  constructor(
    private readonly maxHoldMs: number,
    private readonly lose: (lock: HeldLock, error: LockLostError) => void,
  ) {}

  get size(): number {
    return this.timers.size;
  }

  /** After a grant, and again after extend(): the bound counts from the grant, as the watchdog's does, with one timer per lock. */
  add(lock: HeldLock): void {
    if (this.maxHoldMs === Infinity) return;
    clearTimeout(this.timers.get(lock));
    const timer = setTimeout(
      () => {
        this.timers.delete(lock);
        this.lose(lock, new LockLostError(lock.keys[0]!, lock.fencingToken, `held longer than maxHoldMs (${this.maxHoldMs} ms)`));
      },
      Math.max(0, lock.grantedAt + this.maxHoldMs - performance.now()),
    );
    timer.unref();
    this.timers.set(lock, timer);
  }

  remove(lock: HeldLock): void {
    clearTimeout(this.timers.get(lock));
    this.timers.delete(lock);
  }

  stop(): void {
    for (const timer of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
  }
}
