import type { Logger } from '@nestjs/common';
import type { DataSource, EntityManager, QueryRunner } from 'typeorm';
import { LockContext } from '../context/lock-context.js';
import { LockLostError } from '../errors/lock-lost.error.js';
import { HeldLock, NestedLock } from '../held-lock.js';
import type { LockHandle } from '../lock-handle.js';
import { fenceCheckStatement, fenceStatement } from '../storage/lock-sql.js';
import type { LockIsolationLevel } from './locked-call.options.js';

/** Open fenced transactions by the EntityManager their method sees: how nested calls find and join them. */
const openTransactions = new WeakMap<EntityManager, FencedTransaction>();
/** How many fenced transactions are fencing a lock right now (a lock held by an outer call can be fenced by several). */
const fencingCount = new WeakMap<HeldLock, number>();

/**
 * One REQUIRES_NEW business transaction on the app's DataSource that commits only while its
 * locks are still this holder's (DESIGN.md §3, G2). Its locks were granted before it began, in
 * their own committed transaction on the library's pool. Before COMMIT the fence runs in this
 * very transaction: it flips the holders' log rows ACQUIRED -> COMPLETED only if still live. A
 * takeover must update those same rows (to EXPIRED), so InnoDB orders the two: either the takeover
 * waits for our COMMIT, or we see EXPIRED, flip nothing, and roll back.
 *
 * Nested lock calls inside it JOIN it (same connection, same EntityManager, no new transaction):
 * a second transaction on a second connection could wait forever for row locks this one holds.
 * Locks such nested calls had to take are enlisted: fenced with this transaction and released
 * after it ends.
 */
export class FencedTransaction {
  private state: 'open' | 'ending' | 'ended' = 'open';
  private readonly enlisted = new Set<HeldLock>();

  private constructor(
    private readonly runner: QueryRunner,
    /** The locks covering the keys of the call that opened it (its own and any held by outer calls). */
    private readonly locks: readonly HeldLock[],
  ) {}

  /** The open fenced transaction of the current call chain, if there is one. */
  static current(): FencedTransaction | undefined {
    const manager = LockContext.manager();
    const transaction = manager ? openTransactions.get(manager) : undefined;
    return transaction?.state === 'open' ? transaction : undefined;
  }

  get manager(): EntityManager {
    return this.runner.manager;
  }

  /** Fences `lock` with this transaction and releases it when the transaction ends. */
  enlist(lock: HeldLock): void {
    this.enlisted.add(lock);
  }

  /**
   * Opens the transaction, runs `fn` in it (with `handle` and `manager` in the lock context), fences
   * and commits; then releases `handle` (RELEASED), or FAILED after a rollback. `fn`'s error is
   * rethrown as is; a lost lock at the fence rolls back and throws LockLostError.
   */
  static async run<T>(
    settings: { dataSource: DataSource; isolationLevel: LockIsolationLevel; logger: Logger },
    handle: LockHandle,
    locks: ReadonlyMap<string, HeldLock>,
    fn: () => Promise<T> | T,
  ): Promise<T> {
    const runner = settings.dataSource.createQueryRunner('master');
    const transaction = new FencedTransaction(runner, [...new Set(locks.values())]);
    let result: T;
    try {
      await runner.startTransaction(settings.isolationLevel);
      openTransactions.set(runner.manager, transaction);
      result = await LockContext.run({ handle, locks, manager: runner.manager }, fn);
      await transaction.fenceAndCommit();
    } catch (error) {
      await transaction.rollbackQuietly(settings.logger);
      await transaction.endLocks(handle, true, settings.logger);
      throw error;
    } finally {
      transaction.state = 'ended';
      openTransactions.delete(runner.manager);
      await runner.release().catch((e: unknown) => settings.logger.warn(`Could not return a fenced transaction's connection: ${String(e)}`));
    }
    await transaction.endLocks(handle, false, settings.logger);
    return result;
  }

  /** The fence, then COMMIT. Rolls back and throws LockLostError if any lock is no longer ours. */
  private async fenceAndCommit(): Promise<void> {
    this.state = 'ending';
    const locks = [...new Set([...this.locks, ...this.enlisted])];
    for (const lock of locks) beginFence(lock);
    try {
      for (const lock of locks) await this.fence(lock);
      await this.runner.commitTransaction();
    } finally {
      for (const lock of locks) endFence(lock);
    }
  }

  private async fence(lock: HeldLock): Promise<void> {
    // Known lost (taken over, lease ran out unrenewed, maxHoldMs): never commit on it.
    if (!lock.live) throw lostReason(lock, `it was already ${lock.state} before the commit`);
    const { sql, parameters } = fenceStatement(lock.owner);
    // TypeORM's structured result: `affected` is mysql2's affectedRows. Matched and changed rows are
    // the same here (every matched row changes ACQUIRED -> COMPLETED), so CLIENT_FOUND_ROWS on or off
    // gives the same count.
    const flipped = Number((await this.runner.query(sql, parameters, true)).affected ?? 0);
    if (flipped >= lock.targets.length) return;
    // Rows already COMPLETED by an earlier fenced transaction on the same (outer) lock: count the
    // live rows with a locking read instead (see fenceCheckStatement).
    const check = fenceCheckStatement(lock.owner);
    const rows = (await this.runner.query(check.sql, check.parameters)) as { live: unknown }[];
    if (Number(rows[0]?.live ?? 0) >= lock.targets.length) return;
    throw new LockLostError(
      lock.keys[0]!,
      lock.fencingToken,
      'its lease ran out and another holder took the key over before this transaction could commit; it was rolled back',
    );
  }

  private async rollbackQuietly(logger: Logger): Promise<void> {
    if (!this.runner.isTransactionActive) return;
    try {
      await this.runner.rollbackTransaction();
    } catch (error) {
      // The connection is gone: the server rolls back on its own.
      logger.warn(`Rollback of a fenced transaction failed: ${String(error)}`);
    }
  }

  /**
   * Releases the call's own locks and the enlisted ones. After a rollback, as FAILED (errors are
   * logged, never thrown over the original error). After a commit, as RELEASED; if a lock turns
   * out lost by then, the commit was still fenced and valid (the fence held its rows until COMMIT),
   * so that is a warning, not an error.
   */
  private async endLocks(handle: LockHandle, failed: boolean, logger: Logger): Promise<void> {
    const ends: Promise<void>[] = [releaseAs(handle, failed)];
    for (const lock of this.enlisted) ends.push(lock.releaseAs(failed));
    for (const outcome of await Promise.allSettled(ends)) {
      if (outcome.status === 'fulfilled') continue;
      const error: unknown = outcome.reason;
      if (failed && error instanceof LockLostError) continue; // already reported as lost by the engine
      logger.warn(
        failed
          ? `Release after a rolled-back fenced transaction failed: ${String(error)}`
          : `The fenced transaction committed while its lock was held, but the release afterwards failed: ${String(error)}`,
      );
    }
  }
}

function beginFence(lock: HeldLock): void {
  fencingCount.set(lock, (fencingCount.get(lock) ?? 0) + 1);
  lock.fencing = true; // the watchdog leaves the rows alone: the fence decides
}

function endFence(lock: HeldLock): void {
  const count = (fencingCount.get(lock) ?? 1) - 1;
  if (count > 0) fencingCount.set(lock, count);
  else {
    fencingCount.delete(lock);
    lock.fencing = false; // a lock that outlives this transaction (an outer call's) is renewed again
  }
}

function lostReason(lock: HeldLock, fallback: string): LockLostError {
  const reason: unknown = lock.signal.reason;
  return reason instanceof LockLostError ? reason : new LockLostError(lock.keys[0]!, lock.fencingToken, fallback, { cause: reason });
}

function releaseAs(handle: LockHandle, failed: boolean): Promise<void> {
  if (handle instanceof HeldLock || handle instanceof NestedLock) return handle.releaseAs(failed);
  return handle.release();
}
