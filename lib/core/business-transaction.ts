import type { Logger } from '@nestjs/common';
import type { DataSource } from 'typeorm';
import { type FenceHost, type FenceScope, FencedTransaction } from './fenced-transaction.js';
import type { HeldLock, LockTransaction } from './held-lock.js';
import type { LockHandle } from './lock-handle.js';
import type { LockObserver } from './lock-observer.js';
import { DEFAULT_ISOLATION_LEVEL, type LockIsolationLevel } from './locked-call.options.js';
import { LockTimeoutError } from '../errors/lock-timeout.error.js';
import { toTypedError } from '../errors/to-typed-error.js';
import { LockStatementError } from '../store/lock-statement.error.js';
import type { FenceStore } from '../store/lock-store.js';
import { connectWithin } from './connect-within.js';

/** The locks of one fenced call: those ending with it, those of outer calls (fenced, kept), and each key's lock. */
export interface FencedLocks {
  readonly own: readonly HeldLock[];
  readonly kept: readonly HeldLock[];
  readonly byKey: ReadonlyMap<string, HeldLock>;
}

/**
 * A locked call's wait budget (`timeoutMs`, from when it was made): it covers the lock and the
 * DataSource connection its transaction needs, so a pool the app's own work holds full cannot hold
 * the call (and its granted lock, which other processes wait for) past it.
 */
export interface CallBudget {
  readonly startedAt: number;
  readonly timeoutMs: number;
  /** Its timeout is reported by the caller (onLocked 'skip'), not as 'timed-out'. */
  readonly quiet?: boolean;
}

/** What a fenced call needs from the service it runs in. */
export interface FenceSettings {
  readonly host: FenceHost;
  readonly logger: Logger;
  readonly scope?: FenceScope;
}

/**
 * Where the work of a fenced call runs and how it is fenced: a new transaction on the app's
 * DataSource when its lock brings none (a lease lock), the lock's own otherwise (row-lock), fenced
 * by the store; or, in the testing module, no transaction at all.
 */
export interface BusinessTransactions {
  /** A transaction to open while the grant is asked for (see EarlyBusinessTransaction), if opening one early helps. */
  early(isolationLevel: LockIsolationLevel | undefined, budget?: CallBudget): EarlyBusinessTransaction | undefined;
  /** Runs `fn` fenced: commits only while every lock is still held, and ends `locks.own` with it. */
  run<T>(
    settings: FenceSettings,
    handle: LockHandle,
    locks: FencedLocks,
    fn: () => Promise<T> | T,
    isolationLevel: LockIsolationLevel | undefined,
    early?: EarlyBusinessTransaction,
    budget?: CallBudget,
  ): Promise<T>;
  /** Runs `fn` fenced in `opened`, the transaction the lock lives in. */
  runIn<T>(settings: FenceSettings, opened: LockTransaction, handle: LockHandle, locks: FencedLocks, fn: () => Promise<T> | T): Promise<T>;
}

/** Business transactions on the app's DataSource (REQUIRES_NEW), fenced by FencedTransaction. */
export class DataSourceTransactions implements BusinessTransactions {
  private readonly settingsWithStore = new WeakMap<FenceSettings, FenceSettings & { store: FenceStore }>();

  constructor(
    private readonly dataSource: DataSource,
    private readonly fence: FenceStore,
    /** Told of a call that timed out waiting for its transaction's connection, as of any wait that ran out. */
    private readonly observer?: Pick<LockObserver, 'timedOut'>,
  ) {}

  early(isolationLevel: LockIsolationLevel | undefined, budget?: CallBudget): EarlyBusinessTransaction {
    return new EarlyBusinessTransaction(this.dataSource, this.fence, isolationLevel, deadlineOf(budget));
  }

  async run<T>(
    settings: FenceSettings,
    handle: LockHandle,
    locks: FencedLocks,
    fn: () => Promise<T> | T,
    isolationLevel: LockIsolationLevel | undefined,
    early?: EarlyBusinessTransaction,
    budget?: CallBudget,
  ): Promise<T> {
    let opened: LockTransaction;
    try {
      opened = await (early?.take() ?? openBusinessTransaction(this.dataSource, this.fence, isolationLevel, deadlineOf(budget)));
    } catch (error) {
      for (const lock of locks.own) await lock.releaseAs(true).catch(() => undefined);
      // The pool stayed full past the budget: a timeout, as a row-lock caller gets in the same case.
      if (budget && error instanceof LockStatementError && error.kind === 'deadline') {
        const timeout = new LockTimeoutError(handle.keys, handle.mode, performance.now() - budget.startedAt, budget.timeoutMs, { cause: error });
        const own = locks.own[0];
        if (own && !own.internal && !budget.quiet) this.observer?.timedOut(timeout.keys, timeout.mode, timeout.waitedMs, own);
        throw timeout;
      }
      throw toTypedError(error, 'Could not open the fenced transaction');
    }
    return this.runIn(settings, opened, handle, locks, fn);
  }

  runIn<T>(settings: FenceSettings, opened: LockTransaction, handle: LockHandle, locks: FencedLocks, fn: () => Promise<T> | T): Promise<T> {
    return FencedTransaction.run(this.withStore(settings), opened, handle, locks, fn);
  }

  /** `settings` with this fence's store: built once per settings object (a call chain has one), not per call. */
  private withStore(settings: FenceSettings): FenceSettings & { store: FenceStore } {
    let full = this.settingsWithStore.get(settings);
    if (full === undefined) this.settingsWithStore.set(settings, (full = { ...settings, store: this.fence }));
    return full;
  }
}

function deadlineOf(budget: CallBudget | undefined): number {
  return budget ? budget.startedAt + budget.timeoutMs : Infinity;
}

/**
 * A new transaction on the app's DataSource (a second connection while the caller may hold one:
 * REQUIRES_NEW), for a fenced call whose lock does not bring its own transaction. Its connection
 * is waited for until `deadline` at most (see connectWithin).
 */
export async function openBusinessTransaction(
  dataSource: DataSource,
  fence: FenceStore,
  isolationLevel: LockIsolationLevel | undefined,
  deadline = Infinity,
): Promise<LockTransaction> {
  const runner = dataSource.createQueryRunner('master');
  await connectWithin(runner, deadline); // gives a connection that came too late back itself
  try {
    await fence.begin(runner, isolationLevel ?? DEFAULT_ISOLATION_LEVEL);
  } catch (error) {
    await runner.release().catch(() => undefined);
    throw error;
  }
  return { runner, isolationLevel: isolationLevel ?? DEFAULT_ISOLATION_LEVEL, finish: () => runner.release() };
}

/**
 * The business transaction of a lease-locked 'requires-new' call, opened while its first grant
 * try is on the wire: its two round trips (isolation level, START TRANSACTION) overlap the
 * grant's instead of following it. Nothing the work sees changes: START TRANSACTION takes no
 * snapshot and no lock (the first read does, and the work runs only after the grant), so the
 * transaction is the same as one opened after the grant.
 *
 * A connection must never be held while waiting for a lock (the holder's own fenced commit may
 * need one from the same pool): as soon as the grant is known not to be immediate, or the call
 * turns out not to need it, the transaction is rolled back and its connection given back, and the
 * call opens a fresh one after its grant as before.
 */
export class EarlyBusinessTransaction {
  private opening: Promise<LockTransaction> | undefined;

  constructor(
    private readonly dataSource: DataSource,
    private readonly fence: FenceStore,
    private readonly isolationLevel: LockIsolationLevel | undefined,
    private readonly deadline = Infinity,
  ) {}

  /** Starts opening (once). */
  open(): void {
    if (this.opening) return;
    this.opening = openBusinessTransaction(this.dataSource, this.fence, this.isolationLevel, this.deadline);
    this.opening.catch(() => undefined); // a failure is reported by take(), or nowhere if dropped
  }

  /** The transaction being opened, for the call to use; undefined if it was never opened or dropped. */
  take(): Promise<LockTransaction> | undefined {
    const opening = this.opening;
    this.opening = undefined;
    return opening;
  }

  /** Not needed (or not now): rolled back and its connection given back once it has opened. */
  drop(): void {
    const opening = this.take();
    if (!opening) return;
    void opening.then(
      async (transaction) => {
        await transaction.runner.rollbackTransaction().catch(() => undefined);
        await transaction.finish(false).catch(() => undefined);
      },
      () => undefined,
    );
  }
}
