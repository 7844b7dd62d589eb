import type { HeldLock } from './held-lock.js';
import type { LockTarget } from './lock-key.js';

/**
 * The locks this process holds, by stored key: local waiters need not ask the database while a
 * local holder of their key is known.
 */
export class LocalHolds {
  private readonly byKey = new Map<string, Set<HeldLock>>();

  add(lock: HeldLock): void {
    for (const target of lock.targets) {
      let set = this.byKey.get(target.storedKey);
      if (!set) this.byKey.set(target.storedKey, (set = new Set()));
      set.add(lock);
    }
  }

  remove(lock: HeldLock): void {
    for (const target of lock.targets) {
      const set = this.byKey.get(target.storedKey);
      if (!set) continue;
      set.delete(lock);
      if (set.size === 0) this.byKey.delete(target.storedKey);
    }
  }

  /** The locks held and not being released (a release on the wire ends its lock by itself). */
  held(): HeldLock[] {
    return [...this.all()].filter((lock) => lock.state !== 'releasing');
  }

  all(): Set<HeldLock> {
    const held = new Set<HeldLock>();
    for (const locks of this.byKey.values()) for (const lock of locks) held.add(lock);
    return held;
  }

  /** True if a live local permit of a semaphore key among `targets` holds it with another limit than the one asked. */
  otherLimit(targets: readonly LockTarget[]): boolean {
    for (const target of targets) {
      if (target.semaphoreLimit === undefined) continue;
      for (const lock of this.byKey.get(target.storedKey) ?? []) {
        const held = lock.live ? lock.targets.find((t) => t.storedKey === target.storedKey)?.semaphoreLimit : undefined;
        if (held !== undefined && held !== target.semaphoreLimit) return true;
      }
    }
    return false;
  }

  /**
   * True if a local lock conflicts with `targets` and `blocks` says a try would surely fail: a live
   * one, or one whose release is on the wire (a try now would race that release and be refused; the
   * release's end wakes the local waiters).
   */
  blocks(targets: readonly LockTarget[], blocks: (lock: HeldLock) => boolean): boolean {
    const now = performance.now();
    for (const target of targets) {
      for (const lock of this.byKey.get(target.storedKey) ?? []) {
        // Past its local deadline (renewals unconfirmed) it may already be reclaimable: let the waiter ask.
        if (lock.state !== 'releasing' && (!lock.live || now >= lock.localDeadline)) continue;
        if (target.mode !== 'write' && lock.modes[target.key] !== 'write') continue;
        if (blocks(lock)) return true;
      }
    }
    return false;
  }
}
