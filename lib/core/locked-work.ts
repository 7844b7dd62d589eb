import type { Logger } from '@nestjs/common';
import type { BusinessTransactions, CallBudget, EarlyBusinessTransaction, FenceSettings } from './business-transaction.js';
import { LockLostError } from '../errors/lock-lost.error.js';
import { LockContext } from './lock-context.js';
import type { LockHandle } from './lock-handle.js';
import type { LockObserver } from './lock-observer.js';
import type { LockIsolationLevel } from './locked-call.options.js';
import { RunningHolders } from './running-holders.js';
import { settle } from './settle.js';
import { locksOf, NO_LOCKS, ownLock, releaseAs, releaseQuietly } from './handle-locks.js';

/**
 * How the work of a granted locked call runs: in a fenced transaction (its own, the row-lock
 * holder's, or the chain's open one, joined), or alone with the lock released after it.
 */
export class LockedWork {
  /** withLock / decorated holders running now: shutdown waits for them (bounded). */
  readonly running = new RunningHolders();

  constructor(
    /** Where fenced work runs when its lock brings no transaction (a new one on the app's DataSource). */
    private readonly transactions: BusinessTransactions,
    private readonly observer: LockObserver,
    private readonly logger: Logger,
    /** What every fenced call runs with. */
    private readonly fenceSettings: FenceSettings,
  ) {}

  /**
   * Runs `fn` as part of the call chain that holds `handle`, then releases it (FAILED if `fn` threw).
   * A row-lock's work runs in its own transaction, fenced; one taken inside the chain's open one ends with it.
   */
  runHolding<T>(handle: LockHandle, fn: (lock: LockHandle) => Promise<T> | T): Promise<T> {
    const own = ownLock(handle);
    // Not an async frame around the fenced run: a row-lock's work is on the critical path of its key.
    if (own?.transaction || own?.endsWithTransaction) return this.runFenced(handle, fn, undefined);
    return this.runAlone(handle, fn);
  }

  private async runAlone<T>(handle: LockHandle, fn: (lock: LockHandle) => Promise<T> | T): Promise<T> {
    const leave = this.running.enter();
    try {
      let result: T;
      try {
        result = await LockContext.run(this.fenceSettings.host, handle, locksOf(handle), undefined, () => fn(handle));
      } catch (error) {
        await releaseQuietly(handle, error, this.logger);
        throw error;
      }
      await releaseAs(handle, false);
      return result;
    } finally {
      leave();
    }
  }

  /**
   * `fn` in a fenced transaction: the chain's open one (joined), the row-lock holder's own, or a new one
   * on the DataSource. The call's own lock ends in the commit; locks held by outer calls are fenced and kept.
   */
  runFenced<T>(
    handle: LockHandle,
    fn: (lock: LockHandle) => Promise<T> | T,
    isolationLevel: LockIsolationLevel | undefined,
    early?: EarlyBusinessTransaction,
    budget?: CallBudget,
  ): Promise<T> {
    const own = ownLock(handle);
    const byKey = locksOf(handle);
    // Looked up after the grant: an outer transaction that ended meanwhile is not joined.
    const outer = LockContext.openCall(this.fenceSettings.host);
    if (outer || own?.transaction) early?.drop();
    if (outer && !own?.transaction) {
      if (own && !own.endsWithTransaction) {
        own.endsWithTransaction = true;
        outer.enlist(own);
      }
      // Locks this call reuses from outer calls guard its work too: the transaction it joins fences them at its commit.
      if (own !== handle) for (const lock of new Set(byKey.values())) if (lock !== own) outer.keep(lock);
      // As in a transaction of its own, an integration's ambient transaction is the joined one while `fn` runs.
      const scope = this.fenceSettings.scope;
      const manager = outer.manager;
      const work = scope && manager ? () => scope(manager, () => settle(() => fn(handle))) : () => fn(handle);
      return settle(() => LockContext.run(this.fenceSettings.host, handle, byKey, outer.manager, work, outer));
    }
    const leave = this.running.enter();
    // A lock of its own and no other: nothing outer to keep (the common case, no set or copy).
    const kept = own === handle ? NO_LOCKS : [...new Set(byKey.values())].filter((lock) => lock !== own);
    const locks = { own: own ? [own] : NO_LOCKS, kept, byKey };
    const work = () => fn(handle);
    // Handlers rather than an async frame: every fenced call passes here.
    return settle(() =>
      own?.transaction
        ? this.transactions.runIn(this.fenceSettings, own.transaction, handle, locks, work)
        : this.transactions.run(this.fenceSettings, handle, locks, work, isolationLevel, early, budget),
    ).then(
      (value) => {
        leave();
        return value;
      },
      (error: unknown) => {
        if (error instanceof LockLostError) this.observer.fenceRefused(own ?? locks.kept[0]!);
        leave();
        throw error;
      },
    );
  }
}
