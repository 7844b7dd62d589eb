import { randomUUID } from 'node:crypto';
import type { DataSource, QueryRunner } from 'typeorm';
import { backoffDelay } from '../../core/backoff.js';
import type { FencedTransaction } from '../../core/fenced-transaction.js';
import { HeldLock, type HeldLockHost } from '../../core/held-lock.js';
import type { AttemptResult, GrantAttempt, LockStrategy } from '../../core/lock-strategy.js';
import { LockLostError } from '../../errors/lock-lost.error.js';
import { TooManyLockWaitersError } from '../../errors/too-many-lock-waiters.error.js';
import type { GrantOutcome } from '../../lock-log/grant.sql.js';
import { endInCommitStatement } from '../../lock-log/hold.sql.js';
import type { LockLog } from '../../lock-log/lock-log.js';
import { explainLoss } from '../../lock-log/loss.js';
import { classify } from '../../mysql/errno.js';
import { LockStatementError } from '../../mysql/lock-statement.error.js';
import { type EndStatus, LockStatus } from '../../mysql/sql.js';
import { lockRowsStatements } from './row-lock.sql.js';
import { abandon, endQuietly, isNoWait } from './row-lock-session.js';

export interface RowLockSettings {
  readonly retryMinDelayMs: number;
  readonly retryMaxDelayMs: number;
  /** Most acquisitions of this process waiting in the database at once. */
  readonly maxWaiters: number;
  /** The DataSource's pool size: row-lock sessions (holders and waiters) never take its last connection. */
  readonly poolSize: number;
}

/** The connection holding the lock's transaction lost; the watcher calls this. */
export interface RowLockHost extends HeldLockHost {
  lost(lock: HeldLock, error: LockLostError, giveBack: boolean): void;
}

/**
 * The pessimistic lock: a transaction on a connection of the app's DataSource takes InnoDB row
 * locks on the keys' rows (FOR UPDATE, or shared for readers) and keeps them; the locked work runs
 * in that transaction, and COMMIT or ROLLBACK releases. The server queues the waiters, hands the
 * lock over at COMMIT, and frees it the moment the holder's connection closes.
 *
 * Once the row locks are held, one short transaction on the library's pool records the grant in
 * the lock log, as a lease grant does: the fencing token (shared with leases, so it keeps growing
 * whichever strategy takes the key) and the audit row, both committed before the work starts, so
 * a holder whose connection is killed leaves its row (ended by the next holder) and its token is
 * never handed out again. A lease holder of the same key is seen there as busy; a lease grant sees
 * the row-lock holder's live row: the two strategies exclude each other.
 */
export class RowLockStrategy implements LockStrategy {
  readonly name = 'row-lock' as const;
  /** Connections taken by row-lock sessions: waiting ones, and all (waiting and holding). */
  private waiting = 0;
  private sessions = 0;
  private readonly open = new Set<HeldLock>();
  private readonly abandoners = new Map<HeldLock, () => void>();

  constructor(
    private readonly host: RowLockHost,
    private readonly log: LockLog,
    private readonly dataSource: DataSource,
    private readonly settings: RowLockSettings,
  ) {}

  waitsForLocalRelease(): boolean {
    return false; // the server queues waiters and hands over at COMMIT: asking is waiting
  }

  retryDelay(failedTries: number): number {
    return backoffDelay(failedTries, this.settings.retryMinDelayMs, this.settings.retryMaxDelayMs);
  }

  async tryGrant(attempt: GrantAttempt): Promise<AttemptResult> {
    this.admit(attempt);
    this.waiting++;
    this.sessions++;
    const runner = this.dataSource.createQueryRunner('master');
    let holding = false;
    try {
      await runner.connect();
      await runner.startTransaction(attempt.isolationLevel ?? 'READ COMMITTED');
      const outcome = await this.lockAndRecord(runner, attempt);
      if (!outcome.lock) return outcome;
      holding = true;
      this.hold(outcome.lock, runner);
      return outcome;
    } catch (error) {
      const failure = LockStatementError.from(error);
      if (['retry', 'deadline', 'interrupted', 'connection-lost', 'unreachable'].includes(failure.kind)) return { failure };
      throw failure;
    } finally {
      this.waiting--;
      if (!holding) {
        this.sessions--;
        await endQuietly(runner);
      }
    }
  }

  /** A nested call inside the chain's fenced transaction: the row locks are taken by that transaction. */
  async grantWithin(transaction: FencedTransaction, attempt: GrantAttempt): Promise<AttemptResult> {
    return this.lockAndRecord(transaction.runner, attempt);
  }

  async release(lock: HeldLock, status: EndStatus | 'EXPIRED', note?: string): Promise<void> {
    const transaction = lock.transaction;
    if (transaction && status === LockStatus.RELEASED) {
      // The fence of a plain release: the rows end in the lock's own transaction, then COMMIT.
      const { sql, parameters } = endInCommitStatement(lock.rowIds, lock.acquisitionId);
      let ended = 0;
      try {
        ended = Number((await transaction.runner.query(sql, parameters, true)).affected ?? 0);
        if (ended >= lock.rowIds.length) {
          await transaction.runner.commitTransaction();
          await transaction.finish(true);
          return;
        }
      } catch (error) {
        await transaction.finish(false);
        if (classify(error) === 'retry') throw await explainLoss(this.log, lock);
        throw error;
      }
      await transaction.finish(false);
      throw await explainLoss(this.log, lock);
    }
    // Given up (lost, expired, failed) with its transaction still open: the work may still be
    // sending statements on it, so it is abandoned, never rolled back under the work's feet.
    if (transaction) this.abandoners.get(lock)?.();
    const ended = await this.log.endRows(lock.rowIds, status as EndStatus, note);
    if (ended < lock.rowIds.length && status !== LockStatus.EXPIRED) throw await explainLoss(this.log, lock);
  }

  async extend(lock: HeldLock, leaseMs: number): Promise<boolean> {
    const rows = await this.log.extend(lock.rowIds, leaseMs);
    if (rows.length < lock.rowIds.length) return false;
    lock.expiresAt = new Date(Math.min(...rows.map((r) => r.expiresAt.getTime())));
    return true;
  }

  /**
   * The lock was lost (lease taken over, janitor, connection gone) while its work may still be
   * running on the transaction: abandon it rather than roll it back and return the connection,
   * or a statement the work sends next would run in autocommit and commit outside any lock.
   */
  dropped(lock: HeldLock): void {
    this.abandoners.get(lock)?.();
  }

  /** Shutdown: what still holds is aborted, with the same care as a loss. */
  async close(): Promise<void> {
    for (const lock of [...this.open]) this.abandoners.get(lock)?.();
  }

  /** Fails fast rather than drain the DataSource's pool (a process must never deadlock against it). */
  private admit(attempt: GrantAttempt): void {
    const keys = attempt.targets.map((t) => t.key);
    if (this.waiting >= this.settings.maxWaiters)
      throw new TooManyLockWaitersError(
        keys,
        this.settings.maxWaiters,
        `${this.waiting} row-lock acquisitions of this process already wait in the database`,
      );
    if (this.sessions >= this.settings.poolSize - 1)
      throw new TooManyLockWaitersError(
        keys,
        this.settings.poolSize - 1,
        `${this.sessions} of the DataSource's ${this.settings.poolSize} connections are held by row-lock holders and waiters; one must stay free`,
      );
  }

  /** The row locks (waiting in the server within the budget), then the durable grant record. */
  private async lockAndRecord(runner: QueryRunner, attempt: GrantAttempt): Promise<AttemptResult> {
    const requestedAt = performance.now();
    for (let round = 0; ; round++) {
      let complete = true;
      try {
        for (const statement of lockRowsStatements(attempt.targets, this.log.flavor)) {
          // What is left of the budget now: a multi-key request's later statements get less.
          const waitMs = attempt.deadline === Infinity ? Infinity : attempt.deadline - performance.now();
          const rows = (await runner.query(statement.sql(waitMs))) as unknown[];
          if (rows.length < statement.rows) complete = false;
        }
      } catch (error) {
        const kind = classify(error);
        // NOWAIT, the wait bound, or innodb_lock_wait_timeout: the key is held. A deadlock: asked again.
        if (kind === 'retry' || kind === 'interrupted' || isNoWait(error)) return {};
        throw error;
      }
      if (complete) break;
      // First use of a key (or reaped): its rows are created in their own committed statement, so
      // the locking read never lands on a gap; nothing is locked yet at READ COMMITTED.
      if (round > 2) return {};
      await this.log.createKeyRows(attempt.targets.map((t) => t.bytes));
    }
    const acquisitionId = randomUUID();
    const outcome: GrantOutcome = await this.log.grant(
      {
        acquisitionId,
        strategy: 'row-lock',
        targets: attempt.targets,
        leaseMs: attempt.leaseMs,
        waitedMs: performance.now() - attempt.startedAt,
        writerWaitMarkMs: 0,
        writerPreference: true,
        rowLocksAuthoritative: this.log.flavor.cluster !== 'galera',
      },
      attempt.deadline === Infinity ? Infinity : Math.max(attempt.deadline, performance.now()) + 1000,
    );
    if (!outcome.granted) return {}; // a lease holder of the key is alive: roll back, ask again
    const grantedAt = performance.now();
    const leaseFrom = ((outcome as { sentAt?: number }).sentAt ?? requestedAt) + outcome.serverWaitMs;
    const lock = new HeldLock(
      this.host,
      'row-lock',
      acquisitionId,
      attempt.targets,
      outcome.rows,
      attempt.leaseMs,
      leaseFrom,
      grantedAt,
      grantedAt - attempt.startedAt,
      attempt.internal,
    );
    return { lock, reclaimed: outcome.reclaimed };
  }

  /** The lock keeps its transaction; its signal aborts if that connection closes. */
  private hold(lock: HeldLock, runner: QueryRunner): void {
    let finished = false;
    const connection = (runner as unknown as { databaseConnection?: NodeJS.EventEmitter }).databaseConnection;
    const onClose = (error?: unknown): void => {
      if (finished) return;
      this.host.lost(
        lock,
        new LockLostError(
          lock.keys[0]!,
          lock.fencingToken,
          `its database connection closed (${String((error as Error)?.message ?? 'end')})`,
          error ? { cause: error } : undefined,
        ),
        true,
      );
    };
    connection?.once('error', onClose);
    connection?.once('end', onClose);
    this.open.add(lock);
    const settle = (): boolean => {
      if (finished) return false;
      finished = true;
      connection?.off('error', onClose);
      connection?.off('end', onClose);
      lock.transaction = undefined;
      this.open.delete(lock);
      this.abandoners.delete(lock);
      this.sessions--;
      return true;
    };
    this.abandoners.set(lock, () => {
      if (settle()) abandon(runner);
    });
    lock.transaction = {
      runner,
      finish: async (committed: boolean) => {
        if (!settle()) return;
        if (!committed) await endQuietly(runner);
        else await runner.release().catch(() => undefined);
      },
    };
  }
}
