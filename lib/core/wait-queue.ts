import type { LockTarget } from './lock-key.js';
import type { LockMode } from './lock-mode.js';
import type { LockStrategyName } from '../strategies/lock-strategy-name.js';
import type { LockIsolationLevel } from './locked-call.options.js';

/** One caller waiting for a set of keys. Resolved or rejected exactly once. */
/** How often a waiter blocked by a lock of its own process asks the database all the same, ms. */
const LOCAL_HOLDER_RECHECK_MS = 1_000;

export interface Waiter<T> {
  readonly targets: readonly LockTarget[];
  readonly mode: LockMode;
  /** performance.now() at which the caller gives up (Infinity: never). */
  readonly deadline: number;
  readonly startedAt: number;
  /** Lease to ask for, in ms. */
  readonly leaseMs: number;
  /** Most tries (Infinity: only the deadline bounds the wait). */
  readonly maxAttempts: number;
  /** Its timeout is reported by the caller (a skipped job), not as 'timed-out'. */
  readonly quietTimeout: boolean;
  /** The library's own lock (the janitor's). */
  readonly internal: boolean;
  /** What metrics call the lock (`lock.name`), and its strategy. */
  readonly name: string;
  readonly strategy: LockStrategyName;
  /** Isolation of the lock's own transaction, for strategies whose lock is one. */
  readonly isolationLevel?: LockIsolationLevel;
  /** Tries made for this waiter (sent to the database, or answered from local knowledge). */
  tries: number;
  /** Tries the database answered "not granted". */
  refusals: number;
  /** performance.now() of its latest database try, if any. */
  askedAt?: number;
  inFlight: boolean;
  settled: boolean;
  /** Why the latest try could not reach a verdict, if it could not (a broken connection…). */
  lastFailure?: unknown;
  /**
   * Called at most once, when this waiter is known not to be granted at once (others queued ahead,
   * a local holder, a try that did not grant): the caller lets go of what it prepared for an
   * immediate grant (a connection) rather than hold it while waiting.
   */
  onWaiting?: () => void;
  /**
   * Called when a try's first round trip is on the wire, by stores that can tell: what the caller
   * starts then (a decorated call opens its business transaction) no longer goes out ahead of the grant.
   */
  readonly onSent?: () => void;
  resolve(value: T): void;
  reject(error: unknown): void;
  timer?: NodeJS.Timeout;
}

/** What the queue needs from its owner: one try, and local knowledge. */
export interface WaitQueueDriver<T> {
  /** One try for `waiter`; resolves a value on grant, undefined if not granted. */
  attempt(waiter: Waiter<T>): Promise<T | undefined>;
  /**
   * True if a live lock of this process conflicts with `waiter` and a try would surely fail.
   * `askHolders`: the local holders' locks may have been ended elsewhere meanwhile; only a local
   * writer a reader yields to still blocks.
   */
  blockedLocally(waiter: Waiter<T>, askHolders?: boolean): boolean;
  /** Pause after `failedTries` consecutive failures, in ms. */
  delay(failedTries: number): number;
  /** The error for a waiter whose deadline passed or whose tries ran out. */
  timeoutError(waiter: Waiter<T>): unknown;
  /** Gives back a grant nobody will take (its waiter was rejected while the try was in flight). */
  discard(value: T): void;
}

/**
 * FIFO of this process's callers waiting for the same set of keys, served by one poller: however
 * many local callers wait, the database sees one try at a time. A local release wakes it at once
 * (`wake()`); while a local lock is known to conflict it sends nothing.
 */
export class WaitQueue<T> {
  private readonly waiters: Waiter<T>[] = [];
  private polling = false;
  private failedTries = 0;
  private wakeUp: (() => void) | undefined;
  private woken = false;

  constructor(
    private readonly driver: WaitQueueDriver<T>,
    private readonly onEmpty: () => void,
  ) {}

  get size(): number {
    return this.waiters.length;
  }

  /** Adds a waiter and makes sure the poller runs. */
  enqueue(waiter: Waiter<T>): void {
    this.waiters.push(waiter);
    if (this.waiters.length > 1) waiting(waiter);
    if (waiter.deadline !== Infinity) {
      waiter.timer = setTimeout(() => this.expire(waiter), Math.max(0, Math.ceil(waiter.deadline - performance.now())));
    }
    if (!this.polling) void this.poll();
    else this.wake();
  }

  /** Ends the current pause now (a local holder released, or a new waiter arrived). */
  wake(): void {
    this.woken = true;
    this.failedTries = 0;
    this.wakeUp?.();
  }

  /** Rejects every waiter (shutdown). */
  rejectAll(error: unknown): void {
    for (const waiter of this.waiters.splice(0)) this.settle(waiter, undefined, error);
    this.wake();
  }

  private expire(waiter: Waiter<T>): void {
    if (waiter.settled || waiter.inFlight) return; // an in-flight try decides when it returns
    this.finish(waiter, undefined, this.driver.timeoutError(waiter));
  }

  private spent(waiter: Waiter<T>): boolean {
    return waiter.tries >= waiter.maxAttempts || (waiter.tries > 0 && performance.now() >= waiter.deadline);
  }

  private async poll(): Promise<void> {
    this.polling = true;
    try {
      while (this.waiters.length > 0) {
        const head = this.waiters[0]!;
        if (this.spent(head)) {
          this.finish(head, undefined, this.driver.timeoutError(head));
          continue;
        }
        // A live lock of this process conflicts: a database try would surely fail, so none is sent;
        // the try is answered locally (it counts against maxAttempts). A local release wakes the
        // queue; the bounded pause re-checks in case that holder's lease runs out unrenewed. Once a
        // second the database is asked anyway: the holder's lock may have been ended elsewhere (a
        // forced release, a takeover) before this process's next renewal learns of it.
        if (this.driver.blockedLocally(head, performance.now() - (head.askedAt ?? head.startedAt) >= LOCAL_HOLDER_RECHECK_MS)) {
          waiting(head);
          head.tries++;
          if (this.spent(head) || performance.now() >= head.deadline) {
            this.finish(head, undefined, this.driver.timeoutError(head));
            continue;
          }
          await this.pause(this.driver.delay(Number.MAX_SAFE_INTEGER));
          continue;
        }
        head.inFlight = true;
        head.askedAt = performance.now();
        let granted: T | undefined;
        try {
          this.woken = false;
          granted = await this.driver.attempt(head);
        } catch (error) {
          head.inFlight = false;
          this.remove(head);
          this.settle(head, undefined, error);
          continue;
        }
        head.inFlight = false;
        head.tries++;
        if (granted === undefined && head.lastFailure === undefined) head.refusals++;
        if (head.settled) {
          if (granted !== undefined) this.driver.discard(granted); // rejected meanwhile (shutdown)
          continue;
        }
        if (granted !== undefined) {
          this.failedTries = 0;
          this.remove(head);
          this.settle(head, granted);
          continue;
        }
        waiting(head);
        if (this.spent(head)) {
          this.finish(head, undefined, this.driver.timeoutError(head));
          continue;
        }
        if (this.woken) continue; // a release happened while we were asking: ask again now
        await this.pause(this.driver.delay(this.failedTries++));
      }
    } finally {
      this.polling = false;
      this.onEmpty();
    }
  }

  /** Sleeps `ms` (bounded by the head's deadline), or until woken. */
  private pause(ms: number): Promise<void> {
    const head = this.waiters[0];
    const untilDeadline = head ? head.deadline - performance.now() : 0;
    const wait = Math.max(0, Math.min(ms, untilDeadline));
    return new Promise((resolve) => {
      if (this.woken) {
        this.woken = false;
        return resolve();
      }
      const timer = wait === Infinity ? undefined : setTimeout(done, Math.ceil(wait));
      const self = this;
      function done(): void {
        if (timer) clearTimeout(timer);
        self.wakeUp = undefined;
        self.woken = false;
        resolve();
      }
      this.wakeUp = done;
    });
  }

  private remove(waiter: Waiter<T>): void {
    const index = this.waiters.indexOf(waiter);
    if (index >= 0) this.waiters.splice(index, 1);
    if (index === 0) this.wake(); // the next head may be able to go at once
  }

  private settle(waiter: Waiter<T>, value?: T, error?: unknown): void {
    if (waiter.settled) return;
    waiter.settled = true;
    if (waiter.timer) clearTimeout(waiter.timer);
    if (error !== undefined) waiter.reject(error);
    else waiter.resolve(value as T);
  }

  /** Settles a waiter from outside (the driver's timeout path). */
  finish(waiter: Waiter<T>, value: T | undefined, error?: unknown): void {
    this.remove(waiter);
    this.settle(waiter, value, error);
  }
}

function waiting<T>(waiter: Waiter<T>): void {
  const notify = waiter.onWaiting;
  waiter.onWaiting = undefined;
  notify?.();
}
