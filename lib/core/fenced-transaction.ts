import type { Logger } from '@nestjs/common';
import type { DataSource, EntityManager, QueryRunner } from 'typeorm';
import type { FenceStore } from '../store/lock-store.js';
import type { HeldLock, LockTransaction } from './held-lock.js';
import type { LockHandle } from './lock-handle.js';
import { LockContext } from './lock-context.js';
import { fenceAndCommit } from './fence-and-commit.js';
import { JoinedLocks } from './joined-locks.js';
import type { OpenFencedCall } from './open-fenced-call.js';
import { settle } from './settle.js';
import { LockLostError } from '../errors/lock-lost.error.js';
import { DbLockConnectionError } from '../errors/db-lock-connection.error.js';
import { rollbackCause } from './rollback-cause.js';

/**
 * Wraps the work of a fenced call while its transaction is open, given that transaction's
 * EntityManager: how an integration takes part (an ambient-transaction library makes it its
 * current transaction). Must run `work` once and settle with it.
 */
export type FenceScope = <T>(manager: EntityManager, work: () => Promise<T>) => Promise<T>;

/** What the fence needs from the runtime. */
export interface FenceHost {
  /** The lock's rows were ended inside this commit. */
  endedInCommit(lock: HeldLock, releaseMs: number): void;
  /** Gives a lock back (FAILED after a rollback). */
  release(lock: HeldLock, failed: boolean): Promise<void>;
}

/**
 * One business transaction that commits only while its locks are still this holder's, and ends
 * the locks it owns in that same commit. Strategy-neutral: with a lease the transaction is a new
 * one on the app's DataSource opened after the grant; with a row lock it is the lock's own
 * transaction, opened before the grant.
 *
 * Before COMMIT the fence runs in this very transaction: the log rows of the locks ending here go
 * from live to RELEASED, those of locks that outlive it (an outer call's) are written too
 * (COMPLETED, one more fenced commit); only rows still live are touched. A takeover must write
 * the same rows, so InnoDB orders the two: either the takeover waits for our COMMIT, or we find a
 * row gone and roll back with LockLostError. On a multi-primary cluster the written rows are
 * certified: a takeover committed on another node makes our COMMIT fail, reported as LockLostError.
 *
 * Nested lock calls inside it JOIN it (same connection, same EntityManager): a second transaction
 * on a second connection could wait forever for row locks this one holds. Locks such calls took
 * are enlisted: ended with this commit, or given back FAILED after a rollback.
 */
export class FencedTransaction implements OpenFencedCall {
  private state: 'open' | 'ending' | 'ended' = 'open';
  /** Locks nested calls took in this transaction (created on the first: most transactions have none). */
  private enlisted: Set<HeldLock> | undefined;
  private joinedLocks: JoinedLocks | undefined;
  /**
   * Set by an integration that learned why the work may fail (the escaped-write guard, when a write
   * outside the transaction timed out on its row locks): maps the work's failure to what the
   * caller hears. Unset on almost every call, so the fenced path wraps nothing for it.
   */
  explainWorkFailure: ((error: unknown) => unknown) | undefined;
  /** The failure with which the database rolled this transaction back under the work (see workStatementFailed). */
  private rolledBackBy: { error: unknown } | undefined;

  private constructor(
    private readonly opened: LockTransaction,
    /** Locks ending with this transaction. */
    private readonly own: readonly HeldLock[],
    /** Locks held by outer calls: fenced, kept. */
    private kept: readonly HeldLock[],
    private readonly store: FenceStore,
  ) {}

  /** The open fenced transaction `owner` (a lock service's runtime) runs the current call chain's work in, if there is one. */
  static current(owner: object): FencedTransaction | undefined {
    const call = LockContext.openCall(owner);
    return call instanceof FencedTransaction ? call : undefined;
  }

  /** The open fenced transaction on `dataSource` the current call chain's work runs in (whichever lock service opened it). */
  static over(dataSource: DataSource): FencedTransaction | undefined {
    const owner = LockContext.ownerOf((call) => call instanceof FencedTransaction && call.runner.connection === dataSource);
    return owner === undefined ? undefined : FencedTransaction.current(owner);
  }

  /** The fenced transaction, open or ending, on `runner` that the current call chain's work runs in. */
  static onRunner(runner: QueryRunner): FencedTransaction | undefined {
    return LockContext.callWhere((call) => call instanceof FencedTransaction && call.runner === runner) as FencedTransaction | undefined;
  }

  /**
   * Whether `sql`, sent through TypeORM on this transaction's connection, must be refused: once the
   * transaction ends (COMMIT or ROLLBACK on the wire), a statement of the work queued behind that
   * end would run in autocommit, outside the transaction and every lock. Only the end itself passes.
   */
  refuses(sql: string): boolean {
    return this.state !== 'open' && sql !== 'COMMIT' && sql !== 'ROLLBACK';
  }

  get open(): boolean {
    return this.state === 'open';
  }

  get manager(): EntityManager {
    return this.opened.runner.manager;
  }

  get runner(): QueryRunner {
    return this.opened.runner;
  }

  /** At SERIALIZABLE every read of the work takes shared row locks, not only its writes and locking reads. */
  get readsLockRows(): boolean {
    return this.opened.isolationLevel === 'SERIALIZABLE';
  }

  /** The locks that end with this transaction: its own, and those nested calls took in it. */
  get endingLocks(): readonly HeldLock[] {
    return this.ending();
  }

  /**
   * A statement of the work failed. If the database rolled the whole transaction back with it (a deadlock), the work's later
   * statements would each commit on their own, outside every lock: the session is cut so that they fail (a row lock it held
   * is lost as its connection closes), and the call fails with LockLostError even if the work caught the error.
   */
  workStatementFailed(error: unknown): void {
    if (this.state !== 'open' || this.rolledBackBy !== undefined || !this.store.rollsBackTransaction(error, this.opened.runner)) return;
    this.rolledBackBy = { error };
    this.store.cutSession(this.opened.runner);
  }

  /** `lock`, held by an outer call and reused by a call that joined this transaction, is fenced by its commit and kept. */
  keep(lock: HeldLock): void {
    if (!this.kept.includes(lock) && !this.ending().includes(lock)) this.kept = [...this.kept, lock];
  }

  /** Locks of calls that joined it, by key, for later calls of the chain to reuse (created on the first: most transactions have none). */
  get joined(): JoinedLocks {
    return (this.joinedLocks ??= new JoinedLocks());
  }

  /** `lock` ends with this transaction (RELEASED in its commit, FAILED after a rollback). */
  enlist(lock: HeldLock): void {
    (this.enlisted ??= new Set()).add(lock);
  }

  /**
   * Runs `fn` in the transaction (with `handle` and the manager in the lock context), fences and
   * commits, and ends the owned locks in that commit. `fn`'s error is rethrown as is after a
   * rollback (the owned locks end FAILED); a lost lock at the fence rolls back and throws LockLostError.
   * @param opened the transaction, already started: the row-lock holder's own, or a new one on the DataSource.
   */
  static run<T>(
    settings: { host: FenceHost; logger: Logger; scope?: FenceScope; store: FenceStore },
    opened: LockTransaction,
    handle: LockHandle,
    locks: {
      own: readonly HeldLock[];
      kept: readonly HeldLock[];
      byKey: ReadonlyMap<string, HeldLock>;
    },
    fn: () => Promise<T> | T,
  ): Promise<T> {
    const transaction = new FencedTransaction(opened, locks.own, locks.kept, settings.store);
    const manager = opened.runner.manager;
    const scope = settings.scope;
    // Handlers rather than an async frame: every fenced call passes here, and each frame costs
    // promises and microtask hops between the lock's answer and the work, and the work and COMMIT.
    let result: T;
    return settle(() =>
      LockContext.run(settings.host, handle, locks.byKey, manager, scope ? () => scope(manager, () => settle(fn)) : fn, transaction),
    )
      .then(
        (value) => {
          result = value;
          if (transaction.rolledBackBy) throw rollbackCause(undefined, [...transaction.ending(), ...transaction.kept], transaction.rolledBackBy);
          return transaction.fenceAndCommit();
        },
        (error: unknown) => {
          throw transaction.explainWorkFailure ? transaction.explainWorkFailure(error) : error;
        },
      )
      .then(
        () => transaction.committed(settings, result),
        (error: unknown) => transaction.rolledBack(settings, error),
      );
  }

  /** After COMMIT: the connection back, then the owned locks ended in the commit. */
  private committed<T>(settings: { host: FenceHost; logger: Logger }, result: T): Promise<T> {
    this.state = 'ended';
    const endedAt = performance.now();
    return this.opened
      .finish(true)
      .catch((e: unknown) => settings.logger.warn(`Could not return a fenced transaction's connection: ${String(e)}`))
      .then(() => {
        for (const lock of this.ending()) settings.host.endedInCommit(lock, performance.now() - endedAt);
        return result;
      });
  }

  /** The work or the fence failed: ROLLBACK, the connection back, the owned locks FAILED; rethrows (the lost lock first). */
  private async rolledBack(settings: { host: FenceHost; logger: Logger }, error: unknown): Promise<never> {
    // The fence or COMMIT failed (the work's own failure comes while the transaction is still open).
    const atCommit = this.state === 'ending';
    this.state = 'ending';
    await this.rollbackQuietly(settings.logger);
    this.state = 'ended';
    await this.opened.finish(false).catch((e: unknown) => settings.logger.warn(`Could not end a fenced transaction's connection: ${String(e)}`));
    const failing = this.failOwnLocks(settings.host, settings.logger);
    // A commit the database never answered: the give-back would wait as long, so the caller hears at once and it goes on behind.
    if (!(atCommit && error instanceof DbLockConnectionError)) await failing;
    throw rollbackCause(error, [...this.ending(), ...this.kept], this.rolledBackBy);
  }

  private ending(): readonly HeldLock[] {
    if (this.enlisted === undefined) return this.own; // the common case: nothing joined this transaction
    return [...new Set([...this.own, ...this.enlisted])];
  }

  /** The fence, then COMMIT (see fenceAndCommit). */
  private fenceAndCommit(): Promise<void> {
    this.state = 'ending';
    const ending = this.ending();
    const kept = this.kept.length === 0 ? this.kept : this.kept.filter((lock) => !ending.includes(lock));
    return fenceAndCommit(this.store, this.opened.runner, ending, kept);
  }

  private async rollbackQuietly(logger: Logger): Promise<void> {
    // A cut session (its connection closed under the work) was rolled back by the server.
    if (!this.opened.runner.isTransactionActive || this.opened.runner.isReleased) return;
    try {
      await this.opened.runner.rollbackTransaction();
    } catch (error) {
      // The connection is gone: the server rolls back on its own.
      logger.warn(`Rollback of a fenced transaction failed: ${String(error)}`);
    }
  }

  /**
   * After a rollback the locks that were to end here end FAILED (the key is free at once), one after another in a commit's
   * order (the call's own, then those that joined), so their events come as after a commit; errors logged, never thrown.
   */
  private async failOwnLocks(host: FenceHost, logger: Logger): Promise<void> {
    const ending = this.ending();
    for (const lock of ending) lock.endsWithTransaction = false;
    for (const lock of ending) {
      await host.release(lock, true).catch((error: unknown) => {
        if (!(error instanceof LockLostError)) logger.warn(`Release after a rolled-back fenced transaction failed: ${String(error)}`);
      });
    }
  }
}
