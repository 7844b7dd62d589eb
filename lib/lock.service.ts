import { type BeforeApplicationShutdown, Logger, type OnApplicationBootstrap, type OnModuleInit } from '@nestjs/common';
import type { DataSource, EntityManager } from 'typeorm';
import { LockContext } from './core/lock-context.js';
import type { LockHandle, LockInfo } from './core/lock-handle.js';
import { type LockKeys, type LockTarget, resolveTargets } from './core/lock-key.js';
import type { LockOptions } from './core/lock-request.js';
import type { LockStatsSnapshot } from './core/lock-stats.js';
import { type RunLockedOptions, resolveRunLockedOptions } from './core/locked-call.options.js';
import type { ResolvedDbLockOptions } from './db-lock.options.js';
import { LockServiceRegistry } from './db-lock.registry.js';
import { DbLockNotInitializedError } from './errors/db-lock-not-initialized.error.js';
import { InvalidLockKeyError } from './errors/invalid-lock-key.error.js';
import {
  checkListOptions,
  checkReason,
  FORCE_RELEASE_NOTE_PREFIX,
  type ForcedReleaseHolder,
  type ListLocksOptions,
  type LockList,
} from './store/admin.js';
import type { JanitorReport } from './background/janitor.js';
import { databaseBackend } from './lock-service.assembly.js';
import { chosenBackend, type LockServiceBackend } from './lock-service.backend.js';
import { shutDown } from './lock-service.shutdown.js';
import type { PermitWork, SemaphoreHandle, SemaphoreOptions, SemaphoreRunOptions } from './core/semaphore-request.js';
import { SemaphoreCalls } from './core/semaphore-calls.js';
import { toTypedError } from './errors/to-typed-error.js';
import { settle } from './core/settle.js';

export { RUNNING_PARTS } from './lock-service.assembly.js';

/**
 * The public, programmatic API; the decorators forward to `runLocked`. A thin facade: it checks
 * its arguments and hands over to the call chain (reentrancy, locked calls), the runtime (waiting,
 * holding, shutdown) and the lock log (inspect and admin).
 */
export class LockService implements OnModuleInit, OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('DbLock');
  private parts: LockServiceBackend | undefined;

  constructor(
    /** Validated options (defaults applied). */
    readonly options: ResolvedDbLockOptions,
    /** The app's DataSource. Never opened or closed here: the app's TypeORM module owns it. */
    readonly dataSource: DataSource,
    /** Name of that DataSource ('default' unless configured). */
    readonly dataSourceName: string,
  ) {}

  /** Nest lifecycle hook: connects the lock pool, checks the tables and registers this service for the decorators. */
  async onModuleInit(): Promise<void> {
    try {
      this.parts = await (chosenBackend(this) ?? databaseBackend)(this, this.logger);
    } catch (error) {
      // Bootstrap fails fast and typed: the database unreachable, credentials refused, tables missing.
      throw toTypedError(error, `DbLockModule could not start on DataSource '${this.dataSourceName}'`);
    }
    LockServiceRegistry.register(this.dataSourceName, this);
  }

  /** Starts the janitor's timer (unless `janitor: false`); warns when the DataSource pool cannot carry REQUIRES_NEW calls. */
  onApplicationBootstrap(): void {
    this.parts?.start();
  }

  /**
   * Graceful shutdown: refuse new acquisitions and reject waiting callers; stop the janitor; wait
   * up to `shutdownTimeoutMs` for running withLock/decorated holders; abort the signals of locks
   * still held and release them (other processes get the keys at once, not after a lease); stop
   * the watchdog; close the library's connections. Nothing of the library stays open afterwards.
   */
  async beforeApplicationShutdown(): Promise<void> {
    const parts = this.parts;
    if (!parts) {
      LockServiceRegistry.unregister(this.dataSourceName, this);
      return;
    }
    await shutDown(parts, this.options.shutdownTimeoutMs, this.logger, () => {
      LockServiceRegistry.unregister(this.dataSourceName, this);
      this.parts = undefined;
    });
  }

  /**
   * Takes the lock on `keys` (a key, keys, or `{ key, mode }`s), waiting up to `timeoutMs`.
   * Several keys are taken all-or-nothing in one global order. Inside a call chain that already
   * holds the keys (withLock, decorators) it returns at once without SQL.
   * @throws LockTimeoutError when the wait budget or `maxAttempts` runs out; InvalidLockKeyError /
   *   DbLockOptionsError on bad input (no SQL sent); LockUpgradeError when the chain holds a key for
   *   reading and asks to write it; DbLockConnectionError when the database cannot be reached;
   *   TooManyLockWaitersError (row-lock) when too many acquisitions already wait.
   */
  acquire(keys: LockKeys, options?: LockOptions): Promise<LockHandle> {
    return this.parts ? this.parts.chain.acquire(keys, options) : Promise.reject(new DbLockNotInitializedError(this.dataSourceName)); // no async frame: see CallChain.acquire
  }

  /** One try, never waits: the lock, or null if someone else holds it. Same errors as acquire otherwise. */
  async tryAcquire(keys: LockKeys, options?: Omit<LockOptions, 'timeoutMs' | 'maxAttempts'>): Promise<LockHandle | null> {
    return this.require().chain.tryAcquire(keys, options);
  }

  /**
   * Acquires, runs `fn`, and releases on every path: RELEASED if `fn` resolved, FAILED if it threw
   * (its error is rethrown). Inside `fn` the lock is part of the call chain: nested acquisitions of
   * the same keys are free. If another holder took the keys over while `fn` ran, the release after it
   * throws LockLostError. With the row-lock strategy `fn` runs inside the locking transaction
   * (`lockService.manager`), which commits when `fn` resolves and rolls back when it throws.
   */
  async withLock<T>(keys: LockKeys, fn: (lock: LockHandle) => Promise<T> | T, options?: LockOptions): Promise<T> {
    return this.require().chain.withLock(keys, fn, options);
  }

  /**
   * Runs `fn` under the lock on `keys`: the one method the lock decorators forward to.
   * - `transaction: 'requires-new'` (default): `fn` runs in a NEW transaction whose EntityManager is
   *   `lockService.manager` (lease: opened on the app's DataSource after the grant; row-lock: the
   *   lock's own transaction), at `isolationLevel` (lease: default READ COMMITTED; row-lock: default
   *   the server's own). Before COMMIT
   *   the fence checks, in that transaction, that the lock is still ours, and ends it in the same
   *   commit: if it was taken over, ROLLBACK and LockLostError (none of `fn`'s writes exist). If
   *   `fn` throws: ROLLBACK, the lock ends FAILED at once, and `fn`'s error is rethrown.
   * - `transaction: 'none'`: the lock only (as `withLock`); `lockService.currentLock` gives the
   *   fencing token and AbortSignal.
   * - `onLocked: 'skip'`: if the lock cannot be had within `timeoutMs` (default 0 then: one try),
   *   `fn` is not run and the call resolves `undefined` (event 'skipped', `stats().skipped`).
   * Inside an open fenced transaction of this call chain, the call JOINS it (same EntityManager,
   * no new transaction or connection): keys the chain holds cost no round trip; other keys are
   * granted and then fenced and ended together with that transaction.
   * Read-then-write on one key in one chain: LockUpgradeError at once.
   */
  runLocked<T>(keys: LockKeys, fn: (lock: LockHandle) => Promise<T> | T, options: RunLockedOptions & { onLocked: 'skip' }): Promise<T | undefined>;
  runLocked<T>(keys: LockKeys, fn: (lock: LockHandle) => Promise<T> | T, options?: RunLockedOptions & { onLocked?: 'throw' }): Promise<T>;
  runLocked<T>(keys: LockKeys, fn: (lock: LockHandle) => Promise<T> | T, options?: RunLockedOptions): Promise<T | undefined>;
  runLocked<T>(keys: LockKeys, fn: (lock: LockHandle) => Promise<T> | T, options?: RunLockedOptions): Promise<T | undefined> {
    return settle(() => this.require().chain.runLocked(keys, fn, resolveRunLockedOptions(options))); // no async frame; bad input rejects
  }

  /**
   * One of `limit` permits of the semaphore `key`: ≤ `limit` holders at once across every process, each with its own token,
   * lease and signal. As `acquire()`, without `mode`; SemaphoreLimitError if live permits use another limit (or the chain locks it).
   */
  async acquireSemaphore(key: string, limit: number, options?: SemaphoreOptions): Promise<SemaphoreHandle> {
    return new SemaphoreCalls(this.require().chain).acquire(key, limit, options);
  }

  /** `withLock()` for one permit of the semaphore `key` (see `acquireSemaphore()`). */
  async withSemaphore<T>(key: string, limit: number, fn: (permit: SemaphoreHandle) => Promise<T> | T, options?: SemaphoreOptions): Promise<T> {
    return new SemaphoreCalls(this.require().chain).with(key, limit, fn, options);
  }

  /** `runLocked()` under one permit of the semaphore `key`, which `@Semaphore` forwards to (fenced REQUIRES_NEW by default). */
  async runSemaphore<T>(key: string, limit: number, fn: PermitWork<T>, options?: SemaphoreRunOptions): Promise<T | undefined> {
    return new SemaphoreCalls(this.require().chain).run(key, limit, fn, options);
  }

  /** Who holds `key`, in what mode, until when (server clock). */
  async inspect(key: string): Promise<LockInfo> {
    const parts = this.require();
    // One key only: resolveTargets also accepts arrays, which would silently inspect just one of them.
    if (typeof key !== 'string') throw new InvalidLockKeyError(key, 'inspect() takes one key (a string)');
    return parts.inspect(key, this.target(key));
  }

  /** Counters and wait/hold summaries of this process since start. */
  stats(): LockStatsSnapshot {
    const parts = this.require();
    const byPurpose = parts.roundTrips();
    const total = byPurpose.locks + byPurpose.renewals + byPurpose.janitor + byPurpose.admin;
    return parts.observer.snapshot({
      held: parts.runtime.heldCount,
      waiting: parts.runtime.waitingCount,
      roundTrips: total,
      roundTripsBy: byPurpose,
    });
  }

  /**
   * Runs the janitor once now, if no other node's janitor is running (else `ran: false`): reclaims
   * expired holders, prunes old log rows, reaps idle key rows, in batches. Works even with
   * `janitor: false` (only the timer is off then; default settings are used).
   */
  async runJanitor(): Promise<JanitorReport> {
    return this.require().runJanitor();
  }

  /**
   * Live holders (unexpired by the server clock) of this service's keys (its namespace), oldest
   * grant first, one page of at most `limit` (default 100). Pass `next` as `after` for the next page.
   */
  async listLocks(options?: ListLocksOptions): Promise<LockList> {
    const parts = this.require();
    const { limit, after } = checkListOptions(options);
    return parts.listLocks(this.options.namespace, limit, after);
  }

  /**
   * Evicts every holder of `key`: their log rows (all keys of their acquisition) become RELEASED
   * with note 'force-released: <reason>'. The evicted holders' signals abort (at once in this
   * process, at their next renewal elsewhere), their fenced commits and releases fail with
   * LockLostError, and the key is free at once (a row-lock holder keeps its row locks until its
   * transaction ends). Returns the holders evicted (none if it was free).
   */
  async forceRelease(key: string, reason: string): Promise<ForcedReleaseHolder[]> {
    const parts = this.require();
    if (typeof key !== 'string') throw new InvalidLockKeyError(key, 'forceRelease() takes one key, a string');
    const target = this.target(key);
    const why = checkReason(reason);
    const evicted = await parts.forceRelease(target, FORCE_RELEASE_NOTE_PREFIX + why);
    if (evicted.length > 0) {
      parts.observer.forceReleased(key, evicted, why);
      parts.runtime.endedByOthers(
        evicted.map((h) => h.owner),
        FORCE_RELEASE_NOTE_PREFIX + why,
      );
    }
    return evicted;
  }

  /** The lock the current call chain holds most recently (inside withLock or a lock decorator). */
  get currentLock(): LockHandle | undefined {
    return this.parts ? LockContext.current(this.parts.runtime)?.handle : undefined;
  }

  /**
   * The EntityManager of the fenced transaction the current call chain runs in (a lock decorator
   * with `transaction: 'requires-new'`, or any row-lock call). Throws if there is none, rather
   * than let writes escape the fence.
   */
  get manager(): EntityManager {
    return LockContext.openManager(this.parts?.runtime ?? this, this.parts?.managerMissing);
  }

  private target(key: string): LockTarget {
    return resolveTargets(key, 'write', this.options.namespace)[0]!;
  }

  /** The running parts, or DbLockNotInitializedError before init / after shutdown. */
  private require(): LockServiceBackend {
    if (!this.parts) throw new DbLockNotInitializedError(this.dataSourceName);
    return this.parts;
  }
}
