import { type BeforeApplicationShutdown, Logger, type OnModuleInit } from '@nestjs/common';
import type { DataSource, EntityManager } from 'typeorm';
import { LockContext } from './context/lock-context.js';
import { describe, type ResolvedDbLockOptions } from './db-lock.options.js';
import { LockServiceRegistry } from './db-lock.registry.js';
import { DbLockError } from './errors/db-lock.error.js';
import { DbLockNotInitializedError } from './errors/db-lock-not-initialized.error.js';
import { DbLockOptionsError } from './errors/db-lock-options.error.js';
import { InvalidLockKeyError } from './errors/invalid-lock-key.error.js';
import { LockTimeoutError } from './errors/lock-timeout.error.js';
import { LockUpgradeError } from './errors/lock-upgrade.error.js';
import { HeldLock, NestedLock } from './held-lock.js';
import { LockEngine } from './lock-engine.js';
import type { LockHandle, LockInfo } from './lock-handle.js';
import { type LockKeys, type LockTarget, resolveTargets } from './lock-key.js';
import { type LockOptions, resolveLockOptions } from './lock-request.js';
import type { LockStatsSnapshot } from './observability/lock-stats.js';
import { LockConnectionPool } from './storage/lock-connection-pool.js';
import { lockPoolOptions } from './storage/lock-pool-options.js';
import { LockStore } from './storage/lock-store.js';

/**
 * The public, programmatic API. Decorators delegate here. Locks live in the app's MySQL/MariaDB
 * database (lease strategy: DESIGN.md §3); lock statements run on the library's own small pool.
 */
export class LockService implements OnModuleInit, BeforeApplicationShutdown {
  private readonly logger = new Logger('DbLock');
  private engine: LockEngine | undefined;
  private pool: LockConnectionPool | undefined;

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
    LockServiceRegistry.register(this.dataSourceName, this);
  }

  async beforeApplicationShutdown(): Promise<void> {
    LockServiceRegistry.unregister(this.dataSourceName, this);
    const engine = this.engine;
    if (!engine) return;
    await engine.close();
    this.engine = undefined;
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
  async acquire(keys: LockKeys, options?: LockOptions): Promise<LockHandle> {
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
    const own = await engine.acquire({ targets: missing, mode, timeoutMs: resolved.timeoutMs, leaseMs: resolved.leaseMs });
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
   * the same keys are free. If the lock was lost while `fn` ran, LockLostError is thrown after it.
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
    let result: T;
    try {
      result = await LockContext.run({ handle, locks: locksOf(handle), manager }, () => fn(handle));
    } catch (error) {
      await this.releaseQuietly(handle, true, error);
      throw error;
    }
    await releaseAs(handle, false);
    return result;
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
