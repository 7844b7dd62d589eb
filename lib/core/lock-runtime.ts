import type { Logger } from '@nestjs/common';
import { DbLockConnectionError } from '../errors/db-lock-connection.error.js';
import { DbLockError } from '../errors/db-lock.error.js';
import { DbLockSchemaError } from '../errors/db-lock-schema.error.js';
import { LockLostError } from '../errors/lock-lost.error.js';
import { LockTimeoutError } from '../errors/lock-timeout.error.js';
import { LockStatementError } from '../mysql/lock-statement.error.js';
import { LockStatus } from '../mysql/sql.js';
import type { FencedTransaction } from './fenced-transaction.js';
import type { HeldLock, HeldLockHost } from './held-lock.js';
import { checkLease } from './lock-request.js';
import type { LockTarget } from './lock-key.js';
import type { LockMode } from './lock-mode.js';
import type { LockObserver } from './lock-observer.js';
import type { AttemptResult, GrantAttempt, LockStrategy } from './lock-strategy.js';
import type { LockStrategyName } from './lock-strategy-name.js';
import { WaitQueue, type Waiter } from './wait-queue.js';

export interface AcquireRequest {
  readonly targets: readonly LockTarget[];
  readonly mode: LockMode;
  readonly strategy: LockStrategyName;
  readonly timeoutMs: number;
  readonly leaseMs: number;
  readonly maxAttempts: number;
  /** The caller reports a timeout itself (a skipped job): no 'timed-out' event, no timedOut count. */
  readonly quietTimeout?: boolean;
  /** The library's own lock (the janitor's): never counted or announced. */
  readonly internal?: boolean;
  /** Called at most once, as soon as the keys are known not to be granted at once (see Waiter.onWaiting). */
  readonly onWaiting?: () => void;
}

/** What keeps granted locks' leases alive (the watchdog). */
export interface LeaseKeeper {
  add(lock: HeldLock): void;
  remove(lock: HeldLock): void;
  stop(): void;
  readonly size: number;
}

/**
 * The process side of locking, the same for every strategy: one wait queue (one poller) per key
 * set, the locks this process holds (so local waiters need not ask the database while a local
 * holder is known), release and extend of held locks, losses, and shutdown. Strategies make the
 * tries; the observer counts; nothing here knows SQL.
 */
export class LockRuntime implements HeldLockHost {
  private readonly queues = new Map<string, WaitQueue<HeldLock>>();
  /** The queues waiting on each stored key, so a release wakes exactly those. */
  private readonly queuesByKey = new Map<string, Set<WaitQueue<HeldLock>>>();
  private readonly localHolds = new Map<string, Set<HeldLock>>();
  /** Tries on the wire: shutdown waits for them before connections close. */
  private readonly inFlight = new Set<Promise<unknown>>();
  private closing = false;

  constructor(
    private readonly strategies: ReadonlyMap<LockStrategyName, LockStrategy>,
    private readonly observer: LockObserver,
    private readonly keeper: LeaseKeeper,
    private readonly logger: Logger,
  ) {}

  /** User locks this process holds now (not counting nested reentrant handles or the janitor's). */
  get heldCount(): number {
    let held = 0;
    for (const lock of this.heldLocks()) if (!lock.internal) held++;
    return held;
  }

  get waitingCount(): number {
    let waiting = 0;
    for (const queue of this.queues.values()) waiting += queue.size;
    return waiting;
  }

  strategy(name: LockStrategyName): LockStrategy {
    const strategy = this.strategies.get(name);
    if (!strategy) throw new DbLockError(`Unknown lock strategy '${name}'`);
    return strategy;
  }

  /** Waits for the keys within the request's budget; LockTimeoutError past it. */
  acquire(request: AcquireRequest): Promise<HeldLock> {
    if (this.closing) return Promise.reject(new DbLockError('The lock service is shutting down: no new locks are granted'));
    const startedAt = performance.now();
    const queue = this.queueFor(request.strategy, request.targets);
    return new Promise<HeldLock>((resolve, reject) => {
      queue.enqueue({
        targets: request.targets,
        mode: request.mode,
        leaseMs: request.leaseMs,
        maxAttempts: request.maxAttempts,
        quietTimeout: request.quietTimeout === true,
        internal: request.internal === true,
        deadline: startedAt + request.timeoutMs,
        startedAt,
        tries: 0,
        refusals: 0,
        inFlight: false,
        settled: false,
        onWaiting: request.onWaiting,
        resolve,
        reject,
      });
    });
  }

  /**
   * Takes the keys inside an open fenced transaction of the call chain (row-lock joins it), waiting
   * in the database on that transaction's own connection.
   */
  async acquireWithin(transaction: FencedTransaction, request: AcquireRequest): Promise<HeldLock> {
    if (this.closing) throw new DbLockError('The lock service is shutting down: no new locks are granted');
    const strategy = this.strategy(request.strategy);
    if (!strategy.grantWithin) return this.acquire(request);
    const startedAt = performance.now();
    const attempt: GrantAttempt = { ...request, internal: request.internal === true, startedAt, deadline: startedAt + request.timeoutMs, tries: 0, refusals: 0 };
    const result = await strategy.grantWithin(transaction, attempt);
    if (result.lock) return this.adopt(result.lock, startedAt, result.reclaimed);
    const waiter = { ...request, startedAt, deadline: attempt.deadline, tries: 1, quietTimeout: request.quietTimeout === true, lastFailure: result.failure };
    throw this.timeoutError(waiter as unknown as Waiter<HeldLock>);
  }

  async release(lock: HeldLock, failed: boolean): Promise<void> {
    if (lock.state === 'released' || lock.state === 'releasing') return;
    // Taken inside the chain's fenced transaction: it ends with that transaction, not before.
    if (lock.endsWithTransaction && lock.state === 'held') return;
    const wasLost = lock.state === 'lost';
    lock.state = 'releasing';
    this.forget(lock);
    const startedAt = performance.now();
    try {
      await this.strategy(lock.strategy).release(lock, failed ? LockStatus.FAILED : LockStatus.RELEASED);
    } catch (error) {
      if (error instanceof LockLostError) {
        if (!wasLost) this.reportLost(lock, error);
        lock.markLost(error);
        throw error;
      }
      const typed = toTypedError(error, `Releasing ${describeKeys(lock)} failed; its lease will run out on its own`);
      lock.markLost(typed);
      throw typed;
    }
    lock.markReleased();
    this.observer.released(lock, performance.now() - startedAt);
  }

  async extend(lock: HeldLock, leaseMs: number | undefined): Promise<void> {
    // Validated before any SQL: NaN/Infinity would break the statement, a tiny lease end the caller's own lock at once.
    const lease = checkLease(leaseMs) ?? lock.leaseMs;
    if (!lock.live) throw new LockLostError(lock.keys[0]!, lock.fencingToken, `it was already ${lock.state}; it cannot be extended`);
    const sentAt = performance.now();
    let kept: boolean;
    try {
      kept = await this.strategy(lock.strategy).extend(lock, lease);
    } catch (error) {
      throw toTypedError(error, `Extending ${describeKeys(lock)} failed`);
    }
    if (!kept) {
      const error = new LockLostError(lock.keys[0]!, lock.fencingToken, 'another holder took it over after its lease ran out');
      this.lost(lock, error, false);
      throw error;
    }
    lock.leaseMs = lease;
    lock.leaseFrom = Math.max(lock.leaseFrom, sentAt);
  }

  /** The lock's rows were ended inside a fenced commit: local clean-up, the doorbell, the event. */
  endedInCommit(lock: HeldLock, releaseMs: number): void {
    if (lock.state === 'released') return;
    this.forget(lock);
    lock.markReleased();
    this.strategy(lock.strategy).dropped(lock);
    this.observer.released(lock, releaseMs);
  }

  /**
   * A lock is gone: its signal aborts and local waiters are woken. `giveBack`: it was lost from
   * this side (its deadline passed unrenewed, maxHoldMs, its connection closed) and its rows may
   * still be live, so they are ended now and the key frees at once.
   */
  lost(lock: HeldLock, error: LockLostError, giveBack: boolean): void {
    if (lock.signal.aborted) return;
    this.forget(lock);
    lock.markLost(error);
    this.reportLost(lock, error);
    if (!giveBack) this.strategy(lock.strategy).dropped(lock);
    else {
      this.strategy(lock.strategy)
        .release(lock, LockStatus.EXPIRED, `given up by its holder: ${error.reason}`.slice(0, 255))
        .catch((e: unknown) => (e instanceof LockLostError ? undefined : this.logger.warn(`Could not end a lost lock's rows: ${String(e)}`)));
    }
  }

  /** Local locks whose rows an operator ended (`forceRelease`): lost at once, without waiting for the next renewal. */
  endedByOthers(acquisitionIds: readonly string[], note: string): void {
    const wanted = new Set(acquisitionIds);
    for (const lock of this.heldLocks()) {
      if (wanted.has(lock.acquisitionId) && lock.live) this.lost(lock, new LockLostError(lock.keys[0]!, lock.fencingToken, `it was ${note}`), false);
    }
  }

  /** First step of shutdown: refuses new locks and rejects every waiting caller. Idempotent. */
  beginShutdown(): void {
    if (this.closing) return;
    this.closing = true;
    const error = new DbLockError('The lock service shut down while this caller was waiting');
    for (const queue of this.queues.values()) queue.rejectAll(error);
  }

  /** Aborts the signal of every lock still held (about to be released at shutdown). Returns how many user locks it aborted. */
  abortHeld(reason: string): number {
    let aborted = 0;
    for (const lock of this.heldLocks()) {
      if (!lock.live) continue;
      const error = new LockLostError(lock.keys[0]!, lock.fencingToken, reason);
      lock.markLost(error);
      if (lock.internal) continue;
      aborted++;
      this.reportLost(lock, error);
    }
    return aborted;
  }

  /** Refuses new locks, rejects waiters, waits for tries on the wire, releases what this process holds, stops the watchdog. */
  async close(): Promise<void> {
    this.beginShutdown();
    await Promise.allSettled([...this.inFlight]);
    const held = this.heldLocks();
    this.keeper.stop();
    await Promise.allSettled(
      [...held].map((lock) =>
        this.strategy(lock.strategy)
          .release(lock, LockStatus.RELEASED, 'released at shutdown')
          .catch((e: unknown) => (e instanceof LockLostError ? undefined : this.logger.warn(`Release at shutdown failed: ${String(e)}`))),
      ),
    );
    for (const lock of held) this.forget(lock);
    for (const strategy of this.strategies.values()) await strategy.close();
  }

  private queueFor(strategy: LockStrategyName, targets: readonly LockTarget[]): WaitQueue<HeldLock> {
    const keys = targets.map((t) => t.storedKey);
    // JSON, not a joined string: a key may contain any character, so ids must not collide.
    const id = JSON.stringify([strategy, targets.map((t) => [t.storedKey, t.mode])]);
    const existing = this.queues.get(id);
    if (existing) return existing;
    const created = new WaitQueue<HeldLock>(this.driver(strategy), () => {
      if (created.size > 0 || this.queues.get(id) !== created) return;
      this.queues.delete(id);
      for (const key of keys) {
        const set = this.queuesByKey.get(key);
        set?.delete(created);
        if (set?.size === 0) this.queuesByKey.delete(key);
      }
    });
    this.queues.set(id, created);
    for (const key of keys) {
      let set = this.queuesByKey.get(key);
      if (!set) this.queuesByKey.set(key, (set = new Set()));
      set.add(created);
    }
    return created;
  }

  /** The wait queues' view of one strategy. */
  private driver(name: LockStrategyName) {
    const strategy = this.strategy(name);
    return {
      attempt: (waiter: Waiter<HeldLock>) => {
        const attempt = this.attempt(strategy, waiter);
        this.inFlight.add(attempt);
        const done = (): void => void this.inFlight.delete(attempt);
        attempt.then(done, done);
        return attempt;
      },
      blockedLocally: (waiter: Waiter<HeldLock>) => this.blockedLocally(strategy, waiter.targets),
      delay: (failedTries: number) => strategy.retryDelay(failedTries),
      timeoutError: (waiter: Waiter<HeldLock>) => this.timeoutError(waiter),
      discard: (lock: HeldLock) => {
        this.release(lock, false).catch((e: unknown) => this.logger.warn(`Could not give back an unwanted grant: ${String(e)}`));
      },
    };
  }

  private async attempt(strategy: LockStrategy, waiter: Waiter<HeldLock>): Promise<HeldLock | undefined> {
    let result: AttemptResult;
    try {
      result = await strategy.tryGrant({ ...waiter, tries: waiter.tries, refusals: waiter.refusals });
    } catch (error) {
      throw toTypedError(error, `Lock statement for ${waiter.targets.map((t) => `'${t.key}'`).join(', ')} failed`);
    }
    if (!result.lock) {
      waiter.lastFailure = result.failure;
      return undefined;
    }
    waiter.lastFailure = undefined;
    if (this.closing) {
      // Granted while shutting down: hand it straight back rather than leave it to expire.
      await strategy.release(result.lock, LockStatus.RELEASED, 'granted during shutdown').catch(() => undefined);
      return undefined;
    }
    return this.adopt(result.lock, waiter.startedAt, result.reclaimed);
  }

  /** A fresh grant joins this process's bookkeeping: local holds, the watchdog, the observer. */
  private adopt(lock: HeldLock, startedAt: number, reclaimed: number): HeldLock {
    for (const target of lock.targets) {
      let set = this.localHolds.get(target.storedKey);
      if (!set) this.localHolds.set(target.storedKey, (set = new Set()));
      set.add(lock);
    }
    this.keeper.add(lock);
    this.observer.acquired(lock, lock.grantedAt - startedAt, reclaimed);
    return lock;
  }

  private blockedLocally(strategy: LockStrategy, targets: readonly LockTarget[]): boolean {
    const now = performance.now();
    for (const target of targets) {
      for (const lock of this.localHolds.get(target.storedKey) ?? []) {
        // Past its local deadline (renewals not confirmed) a local lock may already be reclaimable
        // in the database: let the waiter ask instead of assuming it is blocked.
        if (!lock.live || now >= lock.localDeadline) continue;
        if (target.mode !== 'write' && lock.modes[target.key] !== 'write') continue;
        if (strategy.waitsForLocalRelease(lock)) return true;
      }
    }
    return false;
  }

  private timeoutError(waiter: Waiter<HeldLock>): Error {
    const waitedMs = performance.now() - waiter.startedAt;
    const keys = waiter.targets.map((t) => t.key);
    const failure = waiter.lastFailure instanceof LockStatementError ? waiter.lastFailure : undefined;
    // The database could not be reached (or the connection broke) on the last try: say so, rather
    // than report a busy key. An interrupted or timed-out statement is a timeout.
    if (failure && (failure.kind === 'unreachable' || failure.kind === 'connection-lost'))
      return toTypedError(failure, `No lock on ${keys.map((k) => `'${k}'`).join(', ')}`);
    if (!waiter.internal && !waiter.quietTimeout) this.observer.timedOut(keys, waiter.mode, waitedMs);
    const timeoutMs = waiter.deadline === Infinity ? Infinity : Math.round(waiter.deadline - waiter.startedAt);
    return new LockTimeoutError(keys, waiter.mode, waitedMs, timeoutMs, failure ? { cause: failure.driverError } : undefined);
  }

  private reportLost(lock: HeldLock, error: LockLostError): void {
    this.observer.lost(lock, error);
  }

  private heldLocks(): Set<HeldLock> {
    const held = new Set<HeldLock>();
    for (const locks of this.localHolds.values()) for (const lock of locks) held.add(lock);
    return held;
  }

  /** Drops a lock from local bookkeeping and wakes local waiters for its keys. */
  private forget(lock: HeldLock): void {
    this.keeper.remove(lock);
    for (const target of lock.targets) {
      const set = this.localHolds.get(target.storedKey);
      if (!set) continue;
      set.delete(lock);
      if (set.size === 0) this.localHolds.delete(target.storedKey);
    }
    const woken = new Set<WaitQueue<HeldLock>>();
    for (const target of lock.targets) for (const queue of this.queuesByKey.get(target.storedKey) ?? []) woken.add(queue);
    for (const queue of woken) queue.wake();
  }
}

/** Turns whatever a lock statement threw into a public, typed error (the driver's error as `cause`). */
export function toTypedError(error: unknown, context: string): Error {
  if (error instanceof DbLockError) return error;
  const failure = LockStatementError.from(error);
  const cause = failure.driverError;
  const detail = cause instanceof Error ? cause.message : String(cause);
  switch (failure.kind) {
    case 'unreachable':
      return new DbLockConnectionError(`${context}: the database could not be reached (${detail})`, 'unreachable', { cause });
    case 'connection-lost':
    case 'deadline':
      return new DbLockConnectionError(`${context}: the connection broke mid-statement; anything it may have granted was given back (${detail})`, 'connection-lost', { cause });
    case 'interrupted':
      return new DbLockConnectionError(`${context}: the statement was interrupted on the server (${detail})`, 'interrupted', { cause });
    case 'denied':
      return new DbLockConnectionError(`${context}: the database refused the library's user (${detail})`, 'denied', { cause });
    case 'schema':
      return new DbLockSchemaError(`${context}: the lock tables are missing or out of date; run the library's migrations (DB_LOCK_MIGRATIONS) (${detail})`, { cause });
    case 'read-only':
      return new DbLockConnectionError(`${context}: the server is read-only (a replica?); locks need the primary (${detail})`, 'read-only', { cause });
    default:
      return new DbLockConnectionError(`${context}: unexpected database error (${detail})`, 'unexpected', { cause });
  }
}

function describeKeys(lock: HeldLock): string {
  return `${lock.mode} lock on ${lock.keys.map((k) => `'${k}'`).join(', ')}`;
}
