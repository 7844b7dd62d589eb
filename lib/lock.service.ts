import { type BeforeApplicationShutdown, Logger, type OnApplicationBootstrap, type OnModuleInit } from '@nestjs/common';
import type { DataSource, EntityManager } from 'typeorm';
import {
  checkListOptions,
  checkReason,
  FORCE_RELEASE_NOTE_PREFIX,
  type ForcedReleaseHolder,
  forceRelease,
  listLocks,
  type ListLocksOptions,
  type LockList,
} from './admin/lock-admin.js';
import { LockContext } from './context/lock-context.js';
import { DB_LOCK_DEFAULTS, describe, type ResolvedDbLockOptions } from './db-lock.options.js';
import { LockServiceRegistry } from './db-lock.registry.js';
import { DbLockError } from './errors/db-lock.error.js';
import { DbLockNotInitializedError } from './errors/db-lock-not-initialized.error.js';
import { DbLockOptionsError } from './errors/db-lock-options.error.js';
import { InvalidLockKeyError } from './errors/invalid-lock-key.error.js';
import { LockTimeoutError } from './errors/lock-timeout.error.js';
import { LockUpgradeError } from './errors/lock-upgrade.error.js';
import { HeldLock, NestedLock } from './held-lock.js';
import { type JanitorReport, LockJanitor } from './janitor/lock-janitor.js';
import { RunningHolders } from './lifecycle/running-holders.js';
import { LockEngine } from './lock-engine.js';
import type { LockHandle, LockInfo } from './lock-handle.js';
import { type LockKeys, type LockTarget, resolveTargets } from './lock-key.js';
import { type LockOptions, resolveLockOptions } from './lock-request.js';
import type { LockStatsSnapshot } from './observability/lock-stats.js';
import { LockConnectionPool } from './storage/lock-connection-pool.js';
import { lockPoolOptions } from './storage/lock-pool-options.js';
import { LockStore } from './storage/lock-store.js';
import { businessPoolWarning } from './transaction/business-pool.js';
import { FencedTransaction } from './transaction/fenced-transaction.js';
import { type RunLockedOptions, resolveRunLockedOptions } from './transaction/locked-call.options.js';

/**
 * The public, programmatic API. Decorators delegate here. Locks live in the app's MySQL/MariaDB
 * database (lease strategy: DESIGN.md §3); lock statements run on the library's own small pool.
 */
export class LockService implements OnModuleInit, OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('DbLock');
  private engine: LockEngine | undefined;
  private pool: LockConnectionPool | undefined;
  private janitor: LockJanitor | undefined;
  /** withLock / decorated holders running now: shutdown waits for them (bounded). */
  private readonly running = new RunningHolders();

  constructor(
    /** Validated options (defaults applied). */
    readonly options: ResolvedDbLockOptions,
    /** The app's DataSource. Never opened or closed here: the app's TypeORM module owns it. */
    readonly dataSource: DataSource,
    /** Name of that DataSource ('default' unless configured). */
    readonly dataSourceName: string,
  ) {}

  async onModuleInit(): Promise<void> {
    const pool = new LockConnectionPool(lockPoolOptions(this.dataSource, this.options.poolSize));
    const store = new LockStore(pool);
    try {
      await store.checkSchema();
    } catch (error) {
      await pool.close();
      throw error;
    }
    this.pool = pool;
    this.engine = new LockEngine(store, this.options, this.logger);
    // Built even when disabled (janitor: false), so runJanitor() works for operators; only the timer is off.
    this.janitor = new LockJanitor(this.engine, this.options.janitor || DB_LOCK_DEFAULTS.janitor, this.options.leaseMs, this.logger);
    LockServiceRegistry.register(this.dataSourceName, this);
  }

  /**
   * Once the whole app is up: starts the janitor's timer (unless `janitor: false`), and warns when
   * the app's DataSource pool is too small for 'requires-new' locked calls (each may need a second
   * connection while its caller holds one).
   */
  onApplicationBootstrap(): void {
    if (this.options.janitor !== false) this.janitor?.start();
    const warning = businessPoolWarning(this.dataSource, this.dataSourceName);
    if (warning) this.logger.warn(warning);
  }

  /**
   * Graceful shutdown: refuse new acquisitions and reject waiting callers; stop the janitor; wait
   * up to `shutdownTimeoutMs` for running withLock/decorated holders; abort the signals of locks
   * still held and release them (other processes get the keys at once, not after a lease); stop
   * the watchdog; close the library's pool. Nothing of the library stays open afterwards.
   */
  async beforeApplicationShutdown(): Promise<void> {
    const engine = this.engine;
    if (!engine) {
      LockServiceRegistry.unregister(this.dataSourceName, this);
      return;
    }
    engine.beginShutdown();
    await this.janitor?.stop();
    if (!(await this.running.waitIdle(this.options.shutdownTimeoutMs))) {
      this.logger.warn(
        `${this.running.size} lock holder(s) still running after shutdownTimeoutMs (${this.options.shutdownTimeoutMs} ms): ` +
          'their signals are aborted and their locks released',
      );
    }
    engine.abortHeld('the lock service shut down and released it');
    await engine.close();
    // Unregistered only now: holders that finished during the wait could still reach the service.
    LockServiceRegistry.unregister(this.dataSourceName, this);
    this.engine = undefined;
    this.janitor = undefined;
    await this.pool?.close();
    this.pool = undefined;
  }

  /**
   * Takes the lock on `keys` (a key, keys, or `{ key, mode }`s), waiting up to `timeoutMs`.
   * Several keys are taken all-or-nothing in one global order. Inside a call chain that already
   * holds the keys (withLock, decorators) it returns at once without SQL.
   * @throws LockTimeoutError when the wait budget runs out; InvalidLockKeyError / DbLockOptionsError on bad input (no SQL sent);
   *   LockUpgradeError when the chain holds a key for reading and asks to write it.
   */
  acquire(keys: LockKeys, options?: LockOptions): Promise<LockHandle> {
    return this.acquireFor(keys, options, false);
  }

  /** acquire(); `quietTimeout`: the caller reports a timeout itself (onLocked 'skip'). */
  private async acquireFor(keys: LockKeys, options: LockOptions | undefined, quietTimeout: boolean): Promise<LockHandle> {
    const engine = this.requireEngine();
    const resolved = resolveLockOptions(options, this.options);
    const targets = resolveTargets(keys, resolved.mode, this.options.namespace);
    const mode = targets.some((t) => t.mode === 'write') ? 'write' : 'read';

    const held = new Map<string, HeldLock>();
    const missing: LockTarget[] = [];
    for (const target of targets) {
      const found = LockContext.find(target.storedKey);
      if (!found) missing.push(target);
      else if (target.mode === 'write' && found.mode === 'read') throw new LockUpgradeError(target.key);
      else held.set(target.storedKey, found.lock);
    }
    if (missing.length === 0) {
      engine.stats.reentrant++;
      return new NestedLock(targets, held, undefined);
    }
    const own = await engine.acquire({ targets: missing, mode, timeoutMs: resolved.timeoutMs, leaseMs: resolved.leaseMs, quietTimeout });
    if (held.size === 0) return own;
    for (const target of missing) held.set(target.storedKey, own);
    return new NestedLock(targets, held, own);
  }

  /** One try, never waits: the lock, or null if someone else holds it. Same errors as acquire otherwise. */
  async tryAcquire(keys: LockKeys, options?: Omit<LockOptions, 'timeoutMs'>): Promise<LockHandle | null> {
    // Validate the caller's own options first: spreading a string or array below would hide what
    // was wrong with it, and a timeoutMs given here would be silently replaced by 0.
    resolveLockOptions(options, this.options, true);
    try {
      return await this.acquire(keys, { ...options, timeoutMs: 0 });
    } catch (error) {
      if (error instanceof LockTimeoutError) return null;
      throw error;
    }
  }

  /**
   * Acquires, runs `fn`, and releases on every path: RELEASED if `fn` resolved, FAILED if it threw
   * (its error is rethrown). Inside `fn` the lock is part of the call chain: nested acquisitions of
   * the same keys are free. If another holder took the keys over while `fn` ran, the release after it
   * throws LockLostError (a lease that ran out with nobody taking over is no loss: nobody else got in).
   */
  async withLock<T>(keys: LockKeys, fn: (lock: LockHandle) => Promise<T> | T, options?: LockOptions): Promise<T> {
    // A missing callback is bad input like a bad key: refuse it before any lock is taken (G9).
    if (typeof fn !== 'function')
      throw new DbLockOptionsError([`fn must be a function, got ${describe(fn)}`], 'withLock() arguments');
    const handle = await this.acquire(keys, options);
    return this.runHolding(handle, fn);
  }

  /**
   * Runs `fn` as part of the call chain that holds `handle`, then releases it (FAILED if `fn`
   * threw). `manager` is what `LockService.manager` returns inside. Used by decorators too.
   */
  async runHolding<T>(handle: LockHandle, fn: (lock: LockHandle) => Promise<T> | T, manager?: EntityManager): Promise<T> {
    const leave = this.running.enter();
    try {
      let result: T;
      try {
        result = await LockContext.run({ handle, locks: locksOf(handle), manager }, () => fn(handle));
      } catch (error) {
        await this.releaseQuietly(handle, true, error);
        throw error;
      }
      await releaseAs(handle, false);
      return result;
    } finally {
      leave();
    }
  }

  /** Who holds `key`, in what mode, until when (server clock). */
  async inspect(key: string): Promise<LockInfo> {
    const engine = this.requireEngine();
    // One key only: resolveTargets also accepts arrays, which would silently inspect just one of them.
    if (typeof key !== 'string') throw new InvalidLockKeyError(key, 'inspect() takes one key (a string)');
    const [target] = resolveTargets(key, 'write', this.options.namespace) as [LockTarget];
    const { holders, serverNow, fencingToken } = await engine.store.inspect(target.bytes);
    const expiresAt = holders.length ? new Date(Math.max(...holders.map((h) => h.expiresAt.getTime()))) : null;
    return {
      key,
      mode: holders.length === 0 ? null : holders.some((h) => h.mode === 'write') ? 'write' : 'read',
      holders: holders.map(({ mode, owner, holder, fencingToken: token, acquiredAt, expiresAt: until }) => ({
        mode,
        owner,
        holder,
        fencingToken: token,
        acquiredAt,
        expiresAt: until,
      })),
      expiresAt,
      fencingToken,
      serverTime: serverNow,
    };
  }

  /** Counters and wait/hold summaries of this process since start. */
  stats(): LockStatsSnapshot {
    const engine = this.requireEngine();
    return engine.stats.snapshot({ held: engine.heldCount, waiting: engine.waitingCount, roundTrips: this.pool?.roundTrips ?? 0 });
  }

  // --- Liveness and admin (issue 5) -------------------------------------------------------------

  /**
   * Runs the janitor once now, if no other node's janitor is running (else `ran: false`): reclaims
   * expired holders, prunes old log rows, reaps idle key rows, in batches. Works even with
   * `janitor: false` (only the timer is off then; default settings are used).
   */
  async runJanitor(): Promise<JanitorReport> {
    this.requireEngine();
    return this.janitor!.run();
  }

  /**
   * Live holders (unexpired by the server clock) of this service's keys (its namespace), oldest
   * grant first, one page of at most `limit` (default 100). Pass `next` as `after` for the next page.
   */
  async listLocks(options?: ListLocksOptions): Promise<LockList> {
    const engine = this.requireEngine();
    const { limit, after } = checkListOptions(options);
    return listLocks(engine.store, this.options.namespace, limit, after);
  }

  /**
   * Evicts every holder of `key`: their log rows (all keys of their acquisition) become RELEASED
   * with note 'force-released: <reason>'. The evicted holders' signals abort (at once in this
   * process, at their next renewal elsewhere), their fenced commits and releases fail with
   * LockLostError, and the key is free at once. Returns the holders evicted (none if it was free).
   */
  async forceRelease(key: string, reason: string): Promise<ForcedReleaseHolder[]> {
    const engine = this.requireEngine();
    if (typeof key !== 'string') throw new InvalidLockKeyError(key, 'forceRelease() takes one key, a string');
    const [target] = resolveTargets(key, 'write', this.options.namespace) as [LockTarget];
    const why = checkReason(reason);
    const evicted = await forceRelease(engine.store, target.bytes, why);
    if (evicted.length > 0) {
      engine.stats.forceReleased += evicted.length;
      this.logger.warn(`Force-released '${key}' (${evicted.map((h) => `${h.mode} holder ${h.holder}`).join(', ')}): ${why}`);
      engine.ownersEnded(
        evicted.map((h) => h.owner),
        FORCE_RELEASE_NOTE_PREFIX + why,
      );
    }
    return evicted;
  }

  /** The lock the current call chain holds most recently (inside withLock or a lock decorator). */
  get currentLock(): LockHandle | undefined {
    return LockContext.current()?.handle;
  }

  /**
   * The EntityManager of the fenced transaction the current call chain runs in (a lock decorator
   * with `transaction: 'requires-new'`). Throws if there is none, rather than let writes escape the fence.
   */
  get manager(): EntityManager {
    const manager = LockContext.manager();
    if (!manager)
      throw new DbLockError(
        'No lock transaction in this call chain: lockService.manager is only available inside a method decorated ' +
          "with @DistributedLock/@ReadLock/@WriteLock (transaction: 'requires-new').",
      );
    return manager;
  }

  // ---- Locked calls (decorators forward here): see lib/transaction/ and lib/decorators/ ----

  /**
   * Runs `fn` under the lock on `keys`: the one method the lock decorators forward to.
   * - `transaction: 'requires-new'` (default): once the lock is granted (its own committed
   *   transaction), `fn` runs in a NEW transaction on the app's DataSource, READ COMMITTED unless
   *   `isolationLevel` says otherwise, whose EntityManager is `lockService.manager`. Before COMMIT
   *   the fence checks, in that transaction, that the lock is still ours: if it was taken over,
   *   ROLLBACK and LockLostError (none of `fn`'s writes exist). If `fn` throws: ROLLBACK, the
   *   lock is released with status FAILED, and `fn`'s error is rethrown.
   * - `transaction: 'none'`: the lock only (as `withLock`); `lockService.currentLock` gives the
   *   fencing token and AbortSignal.
   * - `onLocked: 'skip'`: if the lock cannot be had within `timeoutMs` (default 0 then: one try),
   *   `fn` is not run and the call resolves `undefined` (event 'skipped', `stats().skipped`).
   * Reentrancy: inside an open fenced transaction of this call chain, the call JOINS it (same
   * EntityManager, no new transaction or connection): keys the chain holds cost no round trip;
   * other keys are granted and then fenced and released together with that transaction.
   * Read-then-write on one key in one chain: LockUpgradeError at once.
   */
  runLocked<T>(keys: LockKeys, fn: (lock: LockHandle) => Promise<T> | T, options: RunLockedOptions & { onLocked: 'skip' }): Promise<T | undefined>;
  runLocked<T>(keys: LockKeys, fn: (lock: LockHandle) => Promise<T> | T, options?: RunLockedOptions & { onLocked?: 'throw' }): Promise<T>;
  runLocked<T>(keys: LockKeys, fn: (lock: LockHandle) => Promise<T> | T, options?: RunLockedOptions): Promise<T | undefined>;
  async runLocked<T>(keys: LockKeys, fn: (lock: LockHandle) => Promise<T> | T, options?: RunLockedOptions): Promise<T | undefined> {
    const engine = this.requireEngine();
    const resolved = resolveRunLockedOptions(options);
    let handle: LockHandle;
    try {
      handle = await this.acquireFor(keys, resolved.lock, resolved.onLocked === 'skip');
    } catch (error) {
      if (resolved.onLocked !== 'skip' || !(error instanceof LockTimeoutError)) throw error;
      engine.stats.skipped++;
      engine.emit({ type: 'skipped', keys: error.keys, mode: error.mode, waitedMs: error.waitedMs });
      return undefined;
    }
    if (resolved.transaction === 'none') return this.runHolding(handle, fn);
    const locks = locksOf(handle);
    // Looked up after the grant: an outer transaction that ended meanwhile is not joined.
    const outer = FencedTransaction.current();
    if (outer) {
      const own = handle instanceof HeldLock ? handle : handle instanceof NestedLock ? handle.own : undefined;
      if (own) outer.enlist(own);
      return LockContext.run({ handle, locks, manager: outer.manager }, () => fn(handle));
    }
    // Counted as a running holder, so a graceful shutdown waits for its commit (like withLock).
    const leave = this.running.enter();
    try {
      return await FencedTransaction.run(
        { dataSource: this.dataSource, isolationLevel: resolved.isolationLevel, logger: this.logger },
        handle,
        locks,
        () => fn(handle),
      );
    } finally {
      leave();
    }
  }

  // ---- end of locked calls ----

  /** The engine, or DbLockNotInitializedError before init / after shutdown. */
  protected requireEngine(): LockEngine {
    if (!this.engine) throw new DbLockNotInitializedError(this.dataSourceName);
    return this.engine;
  }

  private async releaseQuietly(handle: LockHandle, failed: boolean, original: unknown): Promise<void> {
    try {
      await releaseAs(handle, failed);
    } catch (releaseError) {
      this.logger.warn(`Release after a failed call also failed (${String(releaseError)}); rethrowing the call's error: ${String(original)}`);
    }
  }
}

/** Every key `handle` covers, mapped to the real lock that holds it. */
function locksOf(handle: LockHandle): Map<string, HeldLock> {
  const locks = new Map<string, HeldLock>();
  if (handle instanceof HeldLock) for (const t of handle.targets) locks.set(t.storedKey, handle);
  if (handle instanceof NestedLock) for (const [key, lock] of handle.holdersByKey()) locks.set(key, lock);
  return locks;
}

async function releaseAs(handle: LockHandle, failed: boolean): Promise<void> {
  if (handle instanceof HeldLock) return handle.releaseAs(failed);
  if (handle instanceof NestedLock) return handle.releaseAs(failed);
  return handle.release();
}
