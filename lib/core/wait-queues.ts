import type { HeldLock } from './held-lock.js';
import type { LockTarget } from './lock-key.js';
import { WaitQueue, type WaitQueueDriver } from './wait-queue.js';

/** One wait queue (one poller) per strategy and key set, found again by the keys a release frees. */
export class WaitQueues {
  private readonly queues = new Map<string, WaitQueue<HeldLock>>();
  /** The queues waiting on each stored key, so a release wakes exactly those. */
  private readonly byKey = new Map<string, Set<WaitQueue<HeldLock>>>();
  /** The keys each queue's callers want to write. */
  private readonly writes = new WeakMap<WaitQueue<HeldLock>, ReadonlySet<string>>();

  /** Numbers callers that get a queue of their own. */
  private callers = 0;

  get size(): number {
    let waiting = 0;
    for (const queue of this.queues.values()) waiting += queue.size;
    return waiting;
  }

  /** `ownQueue`: the caller waits in the database itself (StrategyCapabilities.queuesInServer), with a queue of its own. */
  queueFor(strategy: string, targets: readonly LockTarget[], driver: () => WaitQueueDriver<HeldLock>, ownQueue = false): WaitQueue<HeldLock> {
    const keys = targets.map((t) => t.storedKey);
    // JSON, not a joined string: a key may contain any character, so ids must not collide.
    const id = JSON.stringify([strategy, targets.map((t) => [t.storedKey, t.mode, t.semaphoreLimit ?? 0])]) + (ownQueue ? `#${++this.callers}` : '');
    const existing = this.queues.get(id);
    if (existing) return existing;
    const created = new WaitQueue<HeldLock>(driver(), () => {
      if (created.size > 0 || this.queues.get(id) !== created) return;
      this.queues.delete(id);
      for (const key of keys) {
        const set = this.byKey.get(key);
        set?.delete(created);
        if (set?.size === 0) this.byKey.delete(key);
      }
      // Readers held back behind a writer of this process that gave up need not wait for their next pause.
      if (this.writes.get(created)?.size) this.wake(targets);
    });
    this.queues.set(id, created);
    this.writes.set(created, new Set(targets.filter((t) => t.mode === 'write').map((t) => t.storedKey)));
    for (const key of keys) {
      let set = this.byKey.get(key);
      if (!set) this.byKey.set(key, (set = new Set()));
      set.add(created);
    }
    return created;
  }

  /** True if a caller of this process already waits on any of `targets`' keys. */
  waitsOn(targets: readonly LockTarget[]): boolean {
    return targets.some((t) => this.byKey.has(t.storedKey));
  }

  /** True if a caller of this process waits to write one of `targets`' keys. */
  writerWaitsOn(targets: readonly LockTarget[]): boolean {
    for (const target of targets)
      for (const queue of this.byKey.get(target.storedKey) ?? []) if (queue.size > 0 && this.writes.get(queue)?.has(target.storedKey)) return true;
    return false;
  }

  /** Wakes the queues waiting on any of `targets`' keys. */
  wake(targets: readonly LockTarget[]): void {
    const woken = new Set<WaitQueue<HeldLock>>();
    for (const target of targets) for (const queue of this.byKey.get(target.storedKey) ?? []) woken.add(queue);
    for (const queue of woken) queue.wake();
  }

  rejectAll(error: Error): void {
    for (const queue of this.queues.values()) queue.rejectAll(error);
  }
}
