import type { HeldLock } from './held-lock.js';
import type { LockTarget } from './lock-key.js';
import { reusable } from './lock-context.js';

/** A joined call's grant still under way. */
export interface InFlightGrant {
  /** Settles (never rejects) once the grant did. */
  readonly settled: Promise<unknown>;
  /** Settles once its first try answered, granted or not (absent: when it settles). */
  readonly firstAnswer: Promise<void> | undefined;
  done: boolean;
}

/**
 * The locks that calls joining one fenced transaction took, by stored key, from their grant until
 * the transaction ends. Such a lock ends only with that commit, after the call that took it has
 * returned: a later call of the same chain asking for its key again must reuse it, as it would
 * an outer call's lock. Asked for again, it would wait for itself until its budget ran out (the
 * commit it waits for is the end of the call that waits). A grant still in flight is awaited.
 */
export class JoinedLocks {
  private readonly byKey = new Map<string, HeldLock | InFlightGrant>();

  /**
   * A call that ends with the transaction asked for `targets`: `granted` is its lock;
   * `firstAnswer` settles once its first try answered (granted, or known to wait).
   */
  note(targets: readonly LockTarget[], granted: Promise<HeldLock>, firstAnswer?: Promise<void>): void {
    const grant: InFlightGrant = {
      done: false,
      settled: granted.then(
        (lock) => {
          grant.done = true;
          for (const target of targets) if (this.byKey.get(target.storedKey) === grant) this.byKey.set(target.storedKey, lock);
        },
        () => {
          grant.done = true;
          for (const target of targets) if (this.byKey.get(target.storedKey) === grant) this.byKey.delete(target.storedKey);
        },
      ),
      firstAnswer,
    };
    for (const target of targets) this.byKey.set(target.storedKey, grant);
  }

  /**
   * `missing` less the keys a joined lock holds, which go to `held` (read → write refused as for an
   * outer call's lock); or, while a grant of one of them is in flight, that grant to wait for.
   */
  split(missing: readonly LockTarget[], held: Map<string, HeldLock>): { missing: LockTarget[]; inFlight?: InFlightGrant } {
    const rest: LockTarget[] = [];
    for (const target of missing) {
      const found = this.byKey.get(target.storedKey);
      if (found !== undefined && 'settled' in found) return { missing: rest, inFlight: found };
      if (found === undefined || !found.live) rest.push(target);
      else held.set(target.storedKey, reusable(target, found, found.targets.find((t) => t.storedKey === target.storedKey)!.mode));
    }
    return { missing: rest };
  }
}

/**
 * After a joined call's grant of one of the keys was under way: `again` with what is left of the
 * budget once it settled, or `timedOut`'s error if the budget ran out first. A caller with no
 * budget (one try) shares that grant's first try: granted at once, it reuses the lock; waiting,
 * it is refused (it would have waited too).
 */
export function afterJoinedGrant<T>(
  inFlight: InFlightGrant,
  timeoutMs: number,
  again: (timeoutMs: number) => Promise<T>,
  timedOut: (waitedMs: number) => Error,
): Promise<T> {
  const startedAt = performance.now();
  if (timeoutMs <= 0)
    return (inFlight.firstAnswer ?? inFlight.settled).then(() => {
      if (!inFlight.done) throw timedOut(performance.now() - startedAt);
      return again(0);
    });
  const settled =
    timeoutMs === Infinity
      ? inFlight.settled.then(() => true)
      : new Promise<boolean>((resolve) => {
          const timer = setTimeout(() => resolve(false), timeoutMs);
          void inFlight.settled.then(() => {
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
