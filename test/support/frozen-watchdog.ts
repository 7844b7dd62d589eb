import { LeaseWatchdog } from '../../lib/background/watchdog.js';

/**
 * A running watchdog made to act as if its process's event loop were stopped (SIGSTOP, a long GC
 * pause): no renewal is sent and no deadline aborts a signal, until thawed. It swaps the running
 * instance's class for this subclass, which overrides the watchdog's `running()` seam, so the
 * library's class carries no test hook.
 */
class FrozenWatchdog extends LeaseWatchdog {
  protected override running(): boolean {
    return false;
  }

  thawNow(): void {
    Object.setPrototypeOf(this, LeaseWatchdog.prototype);
    this.resume();
  }
}

export function freezeWatchdog(watchdog: LeaseWatchdog): void {
  Object.setPrototypeOf(watchdog, FrozenWatchdog.prototype);
}

export function thawWatchdog(watchdog: LeaseWatchdog): void {
  if (watchdog instanceof FrozenWatchdog) watchdog.thawNow();
}
