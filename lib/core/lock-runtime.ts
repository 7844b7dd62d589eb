import type { Logger } from '@nestjs/common';
import { DbLockError } from '../errors/db-lock.error.js';
import { LockLostError } from '../errors/lock-lost.error.js';
import { toTypedError } from '../errors/to-typed-error.js';
import type { LockStrategy } from '../strategies/lock-strategy.js';
import type { LockStrategyName } from '../strategies/lock-strategy-name.js';
import { type AcquireRequest, type FreshWaiter, type LeaseKeeper, newWaiter } from './acquire-request.js';
import { type FirstTryHost, firstTryBeforeQueue } from './first-try.js';
import type { FencedTransaction } from './fenced-transaction.js';
import { settle } from './settle.js';
import type { HeldLock, HeldLockHost } from './held-lock.js';
import { checkLease } from './lock-request.js';
import type { LockObserver } from './lock-observer.js';
import { LocalHolds } from './local-holds.js';
import { LockStatus } from './lock-status.js';
import type { Waiter } from './wait-queue.js';
import { type QueueDriver, queueDriver } from './queue-driver.js';
import { WaitQueues } from './wait-queues.js';
import { takeWithin } from './acquire-within.js';
import { abortHeld, endHeld } from './held-at-shutdown.js';
import { givenUpNote, lostOrEnded, releaseFailure, rowsEnding, settleRelease } from './release-outcome.js';

/**
 * The process side of locking, the same for every strategy: wait queues, the locks this process
 * holds, release and extend, losses, and shutdown. Strategies make the tries; nothing here knows SQL.
 */
export class LockRuntime implements HeldLockHost {
  private readonly queues = new WaitQueues();
  private readonly localHolds = new LocalHolds();
  /** Tries on the wire: shutdown waits for them before connections close. */
  private readonly inFlight = new Set<Promise<unknown>>();
  private closing = false;
  /** Callers in their first try of a strategy that queues in the server (no local queue yet). */
  private firstTries = 0;
  private readonly drivers = new Map<LockStrategyName, QueueDriver>();

  constructor(
    private readonly strategies: ReadonlyMap<LockStrategyName, LockStrategy>,
    private readonly observer: LockObserver,
    private readonly keeper: LeaseKeeper,
    private readonly logger: Logger,
  ) {}

  /** User locks this process holds now (not counting nested reentrant handles or the janitor's). */
  get heldCount(): number {
    let held = 0;
    for (const lock of this.localHolds.held()) if (!lock.internal) held++;
    return held;
  }

  get waitingCount(): number {
    return this.queues.size + this.firstTries;
  }

  strategy(name: LockStrategyName): LockStrategy {
    const strategy = this.strategies.get(name);
    if (!strategy) throw new DbLockError(`Lock strategy '${name}' is not served here (only ${[...this.strategies.keys()].join(', ')})`);
    return strategy;
  }

  /** Waits for the keys within the request's budget; LockTimeoutError past it. */
  acquire(request: AcquireRequest): Promise<HeldLock> {
    if (this.closing) return Promise.reject(new DbLockError('The lock service is shutting down: no new locks are granted'));
    const waiter = newWaiter(request, performance.now());
    const settled = this.observer.waitStarted(waiter);
    const strategy = this.strategy(request.strategy);
    const inServer = strategy.capabilities.queuesInServer;
    // Behind a local holder a try would surely fail, behind a local caller jump the queue: wait in turn.
    // A single try (no budget) is still made beside a caller: permits or a shared read may be free.
    const behindCaller = request.timeoutMs > 0 && this.queues.waitsOn(request.targets);
    if (!inServer && (behindCaller || this.driver(request.strategy).blockedLocally(waiter as Waiter<HeldLock>)))
      return this.queued(request, waiter, settled, false);
    return firstTryBeforeQueue(request, waiter, settled, this.firstTry);
  }

  private readonly firstTry: FirstTryHost = {
    waitsAtOnce: (request) => this.strategy(request.strategy).waitsAtOnce?.(request.targets) === true,
    attempt: (request, waiter) => this.driver(request.strategy).attempt(waiter),
    counted: (delta) => (this.firstTries += delta),
    closing: () => this.closing,
    queued: (request, waiter, settled) =>
      this.queued({ ...request, onWaiting: undefined }, waiter, settled, this.strategy(request.strategy).capabilities.queuesInServer),
  };

  private queued(request: AcquireRequest, waiter: FreshWaiter, settled: <T>(verdict: T) => T, ownQueue: boolean): Promise<HeldLock> {
    const queue = this.queues.queueFor(request.strategy, request.targets, () => this.driver(request.strategy), ownQueue);
    return new Promise<HeldLock>((resolve, reject) =>
      queue.enqueue({ ...waiter, onWaiting: request.onWaiting, resolve: (lock) => resolve(settled(lock)), reject: (e) => reject(settled(e)) }),
    );
  }

  /** Takes the keys inside the chain's open fenced transaction (strategies that `joinsOpenTransaction`), on its connection. */
  async acquireWithin(transaction: FencedTransaction, request: AcquireRequest): Promise<HeldLock> {
    if (this.closing) throw new DbLockError('The lock service is shutting down: no new locks are granted');
    const strategy = this.strategy(request.strategy);
    if (!strategy.grantWithin) return this.acquire(request);
    const waiter = newWaiter(request, performance.now());
    const grant = strategy.grantWithin.bind(strategy, transaction);
    return takeWithin(grant, this.driver(request.strategy), waiter, this.firstTry, this.observer.waitStarted(waiter));
  }

  release(lock: HeldLock, failed: boolean): Promise<void> {
    if (lock.state === 'released' || lock.state === 'releasing') return Promise.resolve();
    // Taken inside the chain's fenced transaction: it ends with that transaction, not before.
    if (lock.endsWithTransaction && lock.state === 'held') return Promise.resolve();
    const wasLost = lock.state === 'lost';
    lock.state = 'releasing';
    this.keeper.remove(lock);
    const startedAt = performance.now();
    const strategy = this.strategy(lock.strategy);
    const releasing = settle(() => strategy.release(lock, ...rowsEnding(lock, strategy, wasLost, failed)));
    // Handlers rather than an async frame: every release passes here. The lock stays a local hold,
    // and local waiters wake, once the release is through, whatever its outcome: before, a grant of
    // theirs (or of a new caller) would race it and be refused.
    const through = (): void => {
      this.localHolds.remove(lock);
      this.queues.wake(lock.targets);
    };
    return releasing.then(
      () => {
        through();
        settleRelease(lock, wasLost, this.observer, startedAt);
      },
      (error: unknown) => {
        through();
        throw releaseFailure(lock, wasLost, this.observer, error);
      },
    );
  }

  async extend(lock: HeldLock, leaseMs: number | undefined): Promise<void> {
    // Validated before any SQL: NaN/Infinity would break the statement, a tiny lease end the caller's own lock at once.
    const lease = checkLease(leaseMs) ?? lock.leaseMs;
    if (!lock.liveNow) throw lostOrEnded(lock);
    const sentAt = performance.now();
    let kept: boolean | LockLostError;
    try {
      kept = await this.strategy(lock.strategy).extend(lock, lease);
    } catch (error) {
      throw toTypedError(error, `Extending ${lock.mode} lock on ${lock.keys.map((k) => `'${k}'`).join(', ')} failed`);
    }
    if (kept !== true) {
      if (lock.state !== 'held') throw lostOrEnded(lock); // released or lost while on the wire: not a takeover
      const error = kept || new LockLostError(lock.keys[0]!, lock.fencingToken, 'another holder took it over after its lease ran out');
      this.lost(lock, error, false);
      throw error;
    }
    if (!this.strategy(lock.strategy).capabilities.renewedByProcessLease) return; // a row-lock lasts as long as its transaction
    lock.leaseMs = lease;
    lock.leaseFrom = Math.max(lock.leaseFrom, sentAt);
    if (!lock.live) throw lostOrEnded(lock); // lost while the extend was on the wire: not extended
    this.keeper.add(lock); // a shorter lease brings its renewal and its deadline forward
  }

  /** The lock's rows were ended inside a fenced commit: local clean-up, the strategy's, the event. */
  endedInCommit(lock: HeldLock, releaseMs: number): void {
    if (lock.state === 'released') return;
    this.forget(lock);
    lock.markReleased();
    this.strategy(lock.strategy).dropped(lock);
    this.observer.released(lock, releaseMs);
  }

  /**
   * A lock is gone: its signal aborts and local waiters are woken. `giveBack`: lost from this side
   * (deadline passed unrenewed, maxHoldMs, connection closed), its rows are ended now: the key frees at once.
   */
  lost(lock: HeldLock, error: LockLostError, giveBack: boolean): void {
    if (lock.signal.aborted) return;
    this.forget(lock);
    lock.markLost(error);
    this.observer.lost(lock, error);
    if (!giveBack) this.strategy(lock.strategy).dropped(lock);
    else {
      this.strategy(lock.strategy)
        .release(lock, LockStatus.EXPIRED, givenUpNote(lock))
        .catch((e: unknown) => (e instanceof LockLostError ? undefined : this.logger.warn(`Could not end a lost lock's rows: ${String(e)}`)));
    }
  }

  /** Local locks whose rows an operator ended (`forceRelease`): lost at once, without waiting for the next renewal. */
  endedByOthers(acquisitionIds: readonly string[], note: string): void {
    const wanted = new Set(acquisitionIds);
    for (const lock of this.localHolds.all()) {
      if (wanted.has(lock.acquisitionId) && lock.live) this.lost(lock, new LockLostError(lock.keys[0]!, lock.fencingToken, `it was ${note}`), false);
    }
  }

  /** First step of shutdown: refuses new locks and rejects every waiting caller. Idempotent. */
  beginShutdown(): void {
    if (this.closing) return;
    this.closing = true;
    this.queues.rejectAll(new DbLockError('The lock service shut down while this caller was waiting'));
  }

  /** Aborts the signal of every lock still held (about to be ended at shutdown). Returns how many user locks it aborted. */
  abortHeld(reason: string): number {
    return abortHeld(this.localHolds, this.observer, reason);
  }

  /**
   * Refuses new locks, rejects waiters, cuts tries waiting in the database, releases what this
   * process holds, waits for tries on the wire (a grant that lands now is handed back), stops the
   * watchdog. Held locks go before the wait: a try of this process may be waiting behind one.
   */
  async close(): Promise<void> {
    this.beginShutdown();
    for (const strategy of this.strategies.values()) strategy.cancelTries?.();
    await this.giveUpHeld();
    await Promise.allSettled([...this.inFlight]);
    this.keeper.stop();
    await this.giveUpHeld();
    for (const strategy of this.strategies.values()) await strategy.close();
  }

  private giveUpHeld(): Promise<void> {
    return endHeld(
      this.localHolds,
      (name) => this.strategy(name),
      this.logger,
      (lock) => this.forget(lock),
    );
  }

  /** The wait queues' view of one strategy. */
  private driver(name: LockStrategyName): QueueDriver {
    let driver = this.drivers.get(name);
    if (!driver) {
      driver = queueDriver(this.strategy(name), {
        localHolds: this.localHolds,
        keeper: this.keeper,
        observer: this.observer,
        logger: this.logger,
        inFlight: this.inFlight,
        writerWaits: (targets) => this.queues.writerWaitsOn(targets),
        closing: () => this.closing,
        release: (lock, failed) => this.release(lock, failed),
      });
      this.drivers.set(name, driver);
    }
    return driver;
  }

  /** Drops a lock from local bookkeeping and wakes local waiters for its keys. */
  private forget(lock: HeldLock): void {
    this.keeper.remove(lock);
    this.localHolds.remove(lock);
    this.queues.wake(lock.targets);
  }
}
