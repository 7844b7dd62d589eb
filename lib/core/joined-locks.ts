import type { HeldLock } from './held-lock.js';
import type { LockTarget } from './lock-key.js';
import { reusable } from './lock-context.js';

/**
 * The locks that calls joining one fenced transaction took, by stored key, from their grant until
 * the transaction ends. Such a lock ends only with that commit, after the call that took it has
 * returned: a later call of the same chain asking for its key again must reuse it, as it would
 * an outer call's lock. Asked for again, it would wait for itself until its budget ran out (the
 * commit it waits for is the end of the call that waits). A grant still in flight is awaited.
 */
export class JoinedLocks {
  private readonly byKey = new Map<string, HeldLock | Promise<unknown>>();

  /** A call that ends with the transaction asked for `targets`: `granted` is its lock. */
  note(targets: readonly LockTarget[], granted: Promise<HeldLock>): void {
    const settled: Promise<unknown> = granted.then(
      (lock) => {
        for (const target of targets) if (this.byKey.get(target.storedKey) === settled) this.byKey.set(target.storedKey, lock);
      },
      () => {
        for (const target of targets) if (this.byKey.get(target.storedKey) === settled) this.byKey.delete(target.storedKey);
      },
    );
    for (const target of targets) this.byKey.set(target.storedKey, settled);
  }

  /**
   * `missing` less the keys a joined lock holds, which go to `held` (read → write refused as for an
   * outer call's lock); or, while a grant of one of them is in flight, that grant to wait for.
   */
  split(missing: readonly LockTarget[], held: Map<string, HeldLock>): { missing: LockTarget[]; inFlight?: Promise<unknown> } {
    const rest: LockTarget[] = [];
    for (const target of missing) {
      const found = this.byKey.get(target.storedKey);
      if (found instanceof Promise) return { missing: rest, inFlight: found };
      if (found === undefined || !found.live) rest.push(target);
      else held.set(target.storedKey, reusable(target, found, found.targets.find((t) => t.storedKey === target.storedKey)!.mode));
    }
    return { missing: rest };
  }
}

/**
 * After a joined call's grant of one of the keys was under way: `again` with what is left of the
 * budget once it settled, or `timedOut`'s error if the budget ran out first.
 */
export function afterJoinedGrant<T>(
  inFlight: Promise<unknown>,
  timeoutMs: number,
  again: (timeoutMs: number) => Promise<T>,
  timedOut: (waitedMs: number) => Error,
): Promise<T> {
  const startedAt = performance.now();
  const settled =
    timeoutMs === Infinity
      ? inFlight.then(() => true)
      : new Promise<boolean>((resolve) => {
          const timer = setTimeout(() => resolve(false), timeoutMs);
          void inFlight.then(() => {
            clearTimeout(timer);
            resolve(true);
          });
        });
  return settled.then((inTime) => {
    const waitedMs = performance.now() - startedAt;
    if (!inTime) throw timedOut(waitedMs);
    return again(Math.max(0, Math.floor(timeoutMs - waitedMs)));
  });
}
