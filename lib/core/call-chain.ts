import type { Logger } from '@nestjs/common';
import type { ResolvedDbLockOptions } from '../db-lock.options.js';
import { DbLockOptionsError } from '../errors/db-lock-options.error.js';
import { LockTimeoutError } from '../errors/lock-timeout.error.js';
import type { BusinessTransactions, CallBudget, EarlyBusinessTransaction } from './business-transaction.js';
import { type FenceScope, FencedTransaction } from './fenced-transaction.js';
import type { HeldLock } from './held-lock.js';
import { afterJoinedGrant } from './joined-locks.js';
import type { OpenFencedCall } from './open-fenced-call.js';
import { LockContext, splitByChain } from './lock-context.js';
import type { LockHandle } from './lock-handle.js';
import { type LockKeys, type LockTarget } from './lock-key.js';
import type { LockObserver } from './lock-observer.js';
import { type LockOptions, resolveLockOptions, UNNAMED_LOCK } from './lock-request.js';
import type { LockRuntime } from './lock-runtime.js';
import type { LockIsolationLevel, ResolvedRunLockedOptions } from './locked-call.options.js';
import { NestedLock } from './nested-lock.js';
import { type ChainKeys, targetsOf } from './semaphore-request.js';
import { describe } from './option-checks.js';
import type { RunningHolders } from './running-holders.js';
import { LockedWork } from './locked-work.js';
import { settle } from './settle.js';
import { skipIfLocked } from './skip-if-locked.js';
import { locksOf, ownLock } from './handle-locks.js';

/** How the chain takes a lock: its timeout reported by the caller, in an open fenced transaction (`join`; ending with its commit: `endsWithJoin`), with an early business transaction. */
type AcquireHow = {
  quietTimeout?: boolean;
  join?: OpenFencedCall;
  endsWithJoin?: boolean;
  isolationLevel?: LockIsolationLevel;
  early?: EarlyBusinessTransaction;
};

/**
 * Call-chain semantics, the same for every strategy: reentrancy by async context (a key the chain
 * holds costs no round trip; read → write is refused), and how a locked call runs — its own
 * fenced transaction, joined into the chain's open one, or the lock alone.
 */
export class CallChain {
  /** How the work of a granted call runs: fenced, joined, or alone. */
  private readonly work: LockedWork;

  constructor(
    private readonly runtime: LockRuntime,
    private readonly options: ResolvedDbLockOptions,
    private readonly observer: LockObserver,
    /** Where fenced work runs when its lock brings no transaction (a new one on the app's DataSource). */
    private readonly transactions: BusinessTransactions,
    logger: Logger,
    /** What every fenced transaction's work runs inside (integrations), if anything. */
    fenceScope?: FenceScope,
  ) {
    this.work = new LockedWork(transactions, observer, logger, { host: runtime, logger, scope: fenceScope });
  }

  /**
   * The lock on `keys` for this call chain: keys it holds are reused (no SQL), the others granted.
   * `join`: a row-lock taken inside the chain's open fenced transaction joins it.
   * Not an async frame: every acquisition passes here, and one around the runtime's promise costs
   * promises and microtask hops on the way to the caller. Bad input still rejects, never throws.
   */
  acquire(keys: ChainKeys, options: LockOptions | undefined, how: AcquireHow = {}): Promise<LockHandle> {
    return settle(() => this.acquireNow(keys, options, how));
  }

  private acquireNow(keys: ChainKeys, options: LockOptions | undefined, how: AcquireHow): Promise<LockHandle> {
    const resolved = resolveLockOptions(options, this.options);
    const targets = targetsOf(keys, resolved.mode, this.options.namespace);
    const mode = targets.some((t) => t.mode === 'write') ? 'write' : 'read';
    const { held, missing: notInChain } = splitByChain(targets, this.runtime);
    // Keys that calls joining the same transaction took stay held until its commit: reused as an outer call's.
    // Also for a by-hand acquire() inside the fenced call, which does not join it: it must not wait for itself.
    const chainCall = notInChain.length > 0 ? (how.join ?? LockContext.openCall(this.runtime)) : undefined;
    const joined = chainCall ? chainCall.joined.split(notInChain, held) : { missing: notInChain };
    if (joined.inFlight)
      return afterJoinedGrant(
        joined.inFlight,
        resolved.timeoutMs,
        (timeoutMs) => this.acquireNow(keys, { ...options, timeoutMs }, how),
        (waitedMs) => {
          const error = new LockTimeoutError(
            targets.map((t) => t.key),
            mode,
            waitedMs,
            resolved.timeoutMs,
          );
          if (!how.quietTimeout) this.observer.timedOut(error.keys, mode, waitedMs, { name: resolved.name, mode, strategy: resolved.strategy });
          return error;
        },
      );
    const missing = joined.missing;
    if (missing.length === 0) {
      this.observer.reentrant();
      return Promise.resolve(new NestedLock(targets, held, undefined));
    }
    const can = this.runtime.strategy(resolved.strategy).capabilities;
    // A lock that brings no transaction lets its business transaction open while the grant is
    // asked for, unless the grant is known not to be immediate (see EarlyBusinessTransaction).
    const early = !can.heldByOpenTransaction && !how.join ? how.early : undefined;
    let waiting = false;
    const request = {
      targets: missing,
      mode: mode as LockTarget['mode'],
      strategy: resolved.strategy,
      timeoutMs: resolved.timeoutMs,
      leaseMs: resolved.leaseMs,
      maxAttempts: resolved.maxAttempts,
      name: resolved.name,
      quietTimeout: how.quietTimeout,
      isolationLevel: how.isolationLevel,
      onWaiting: () => {
        waiting = true;
        early?.drop();
        answered?.();
      },
      // Opened once the grant is on the wire: its round trips overlap the grant's without delaying it.
      onSent: early && (() => !waiting && early.open()),
    };
    let answered: (() => void) | undefined;
    let granted: Promise<HeldLock>;
    if (how.join instanceof FencedTransaction && can.joinsOpenTransaction) granted = this.joined(how.join, request);
    else granted = this.runtime.acquire(request);
    if (how.join && (how.endsWithJoin || can.joinsOpenTransaction)) {
      // Its first answer, which a sibling call with no budget shares (see afterJoinedGrant).
      const firstAnswer = waiting ? Promise.resolve() : new Promise<void>((resolve) => (answered = resolve));
      how.join.joined.note(missing, granted, firstAnswer);
      const settledFirst = (): void => answered?.();
      granted.then(settledFirst, settledFirst);
    }
    if (held.size === 0) return granted;
    return granted.then((own) => {
      for (const target of missing) held.set(target.storedKey, own);
      return new NestedLock(targets, held, own);
    });
  }

  /** withLock / decorated holders running now: shutdown waits for them (bounded). */
  get running(): RunningHolders {
    return this.work.running;
  }

  async tryAcquire(keys: LockKeys, options: Omit<LockOptions, 'timeoutMs' | 'maxAttempts'> | undefined): Promise<LockHandle | null> {
    // The caller's own options first: a spread would hide a bad string or array, and replace a timeoutMs given here by 0.
    resolveLockOptions(options, this.options, true);
    try {
      return await this.acquire(keys, { ...options, timeoutMs: 0, maxAttempts: 1 });
    } catch (error) {
      if (error instanceof LockTimeoutError) return null;
      throw error;
    }
  }

  async withLock<T>(keys: ChainKeys, fn: (lock: LockHandle) => Promise<T> | T, options: LockOptions | undefined): Promise<T> {
    // A missing callback is bad input like a bad key: refused before any lock is taken.
    if (typeof fn !== 'function') throw new DbLockOptionsError([`fn must be a function, got ${describe(fn)}`], 'withLock() arguments');
    const handle = await this.acquire(keys, options, { join: LockContext.openCall(this.runtime) });
    return await this.work.runHolding(handle, fn);
  }

  /** The locked call the decorators forward to (see LockService.runLocked); handlers, not an async frame, as every decorated call passes here. */
  runLocked<T>(keys: ChainKeys, fn: (lock: LockHandle) => Promise<T> | T, resolved: ResolvedRunLockedOptions): Promise<T | undefined> {
    // As withLock: a missing callback is refused before any lock is taken or transaction opened.
    if (typeof fn !== 'function')
      return Promise.reject(new DbLockOptionsError([`fn must be a function, got ${describe(fn)}`], 'runLocked() arguments'));
    // Validated with the lock's other options by acquire(), before anything opens.
    const timeoutMs = resolved.lock.timeoutMs ?? this.options.timeoutMs;
    const budget = { startedAt: performance.now(), timeoutMs, quiet: resolved.onLocked === 'skip' };
    const early = resolved.transaction === 'requires-new' ? this.transactions.early(resolved.isolationLevel, budget) : undefined;
    const granted = this.acquire(keys, resolved.lock, {
      quietTimeout: resolved.onLocked === 'skip',
      join: LockContext.openCall(this.runtime),
      endsWithJoin: resolved.transaction !== 'none',
      isolationLevel: resolved.isolationLevel,
      early,
    });
    const run = (handle: LockHandle, work: typeof fn) => this.runGranted(handle, work, resolved, early, budget);
    if (resolved.onLocked === 'skip')
      return skipIfLocked(
        granted,
        fn,
        run,
        () => early?.drop(),
        (error) => {
          const strategy = resolved.lock.strategy ?? this.options.strategy;
          this.observer.skipped(error.keys, error.mode, error.waitedMs, { name: resolved.lock.name ?? UNNAMED_LOCK, mode: error.mode, strategy });
        },
      );
    return granted.then(
      (handle) => run(handle, fn),
      (error: unknown) => {
        early?.drop();
        throw error;
      },
    );
  }

  private runGranted<T>(
    handle: LockHandle,
    fn: (lock: LockHandle) => Promise<T> | T,
    resolved: ResolvedRunLockedOptions,
    early: EarlyBusinessTransaction | undefined,
    budget: CallBudget,
  ): Promise<T> {
    if (resolved.transaction !== 'none') return this.work.runFenced(handle, fn, resolved.isolationLevel, early, budget);
    if (!ownLock(handle)?.transaction) return this.work.runHolding(handle, fn);
    // A row-lock is its own transaction, but 'none' promises the lock only: its manager stays out of
    // reach. Nested row-locks still join that transaction (as under withLock): a new connection for
    // each would wait for slots the chain's own holds keep, a deadlock on the process's own pool.
    const lockOnly = (lock: LockHandle) =>
      LockContext.run(this.runtime, lock, locksOf(lock), null, () => fn(lock), LockContext.openCall(this.runtime));
    return this.work.runFenced(handle, lockOnly, resolved.isolationLevel, early);
  }

  private async joined(transaction: FencedTransaction, request: Parameters<LockRuntime['acquire']>[0]): Promise<HeldLock> {
    const lock = await this.runtime.acquireWithin(transaction, request);
    lock.endsWithTransaction = true;
    transaction.enlist(lock);
    return lock;
  }
}
