import type pg from 'pg';
import type { QueryRunner } from 'typeorm';
import type { LockTarget } from '../../core/lock-key.js';
import type { RowLockAuditRow, RowLockStore, RowLockTake } from '../lock-store.js';
import { LockStatementError } from '../lock-statement.error.js';
import { DEADLOCK_DETECTED, sqlStateOf } from './pg-failures.js';
import type { PgLockLog } from './pg-lock-log.js';
import { insertAuditRows } from './pg-log-rows.sql.js';
import { beginStatement, type PgSessionTransactions, sessionQuery, watchSession } from './pg-session.js';
import {
  bounded,
  bumpStatement,
  lockRowsStatement,
  queueStatements,
  RESTORE_LOCK_TIMEOUT,
  takeGroupStatement,
  tokensTaken,
} from './pg-row-lock.sql.js';
import { groupsOf } from '../key-groups.js';
import { conflictingHolders, takeoverStatements } from './pg-grant.sql.js';
import { keyText, LIVE_STATUSES_SQL, LOCK_LOG_TABLE } from './pg-sql.js';

/** The savepoint a take inside a joined transaction (and the rare path) runs under: a refused take must not end the caller's transaction. */
const TAKE_SAVEPOINT = 'nestjs_db_lock_take';

/** The answer that sends a take on to the rare path (a key row missing, or saying a lease holder may be live). */
const CHECK_LOG: RowLockTake = { taken: false, why: 'check-log' };

const waitLeft = (deadline: number): number => (deadline === Infinity ? Infinity : deadline - performance.now());

/** Sends one batch of statements on the business connection; its results, one per statement. */
type Send = (sql: string) => Promise<pg.QueryResult[]>;

/** Batches on `runner`'s connection; `opener`, if given, rides in front of the first one (its result left out). */
function batchesOn(runner: QueryRunner, opener?: string): Send {
  let pending = opener;
  return async (sql) => {
    const head = pending;
    pending = undefined;
    if (head === undefined) return sessionQuery(runner, sql);
    return (await sessionQuery(runner, `${head};\n${sql}`)).slice(1);
  };
}

/**
 * Row-lock sessions on PostgreSQL: row locks on the keys' rows of db_lock, in the business
 * transaction itself. PostgreSQL ends a transaction on any failed statement (InnoDB keeps it after
 * a lock wait timeout), so a take inside a transaction it joined runs under a savepoint.
 */
export class PgRowLockStore implements RowLockStore {
  constructor(
    private readonly log: PgLockLog,
    private readonly transactions: PgSessionTransactions,
  ) {}

  begin(runner: QueryRunner, isolationLevel?: string): Promise<void> {
    return this.transactions.begin(runner, isolationLevel);
  }

  commit(runner: QueryRunner): Promise<void> {
    return this.transactions.commit(runner);
  }

  /** BEGIN and the take in one round trip for one group of keys (the common case: one key). */
  beginAndTake(runner: QueryRunner, targets: readonly LockTarget[], deadline: number, isolationLevel?: string): Promise<RowLockTake> {
    const groups = groupsOf(targets);
    const take = groups.length === 1 ? takeGroupStatement(groups[0]!, waitLeft(deadline)) : undefined;
    const sent = take && this.transactions.beginVia(runner, `${beginStatement(isolationLevel)};\n${take.sql}`);
    if (!sent) return this.beginThenTake(runner, targets, deadline, isolationLevel);
    return sent.then((results) => {
      const answered = results.slice(1);
      const tokens = tokensTaken(groups[0]!, take.result(answered));
      if (tokens) return { taken: true as const, tokens };
      return take.restoreOwed(answered) ? sessionQuery(runner, RESTORE_LOCK_TIMEOUT).then(() => CHECK_LOG) : CHECK_LOG;
    }, busyOrThrow);
  }

  private async beginThenTake(runner: QueryRunner, targets: readonly LockTarget[], deadline: number, isolationLevel?: string): Promise<RowLockTake> {
    await this.transactions.begin(runner, isolationLevel);
    return this.take(runner, targets, deadline);
  }

  /** Group by group in key order, each bounded by what is left of the budget. */
  take(runner: QueryRunner, targets: readonly LockTarget[], deadline: number): Promise<RowLockTake> {
    return this.takeOn(batchesOn(runner), targets, deadline, true);
  }

  /** `restore`: put lock_timeout back after a refused take (see takeGroupStatement's restoreOwed); not under a savepoint, whose rollback does. */
  private async takeOn(send: Send, targets: readonly LockTarget[], deadline: number, restore: boolean): Promise<RowLockTake> {
    try {
      const tokens = new Map<string, number>();
      for (const group of groupsOf(targets)) {
        const take = takeGroupStatement(group, waitLeft(deadline));
        const results = await send(take.sql);
        const taken = tokensTaken(group, take.result(results));
        if (!taken) {
          if (restore && take.restoreOwed(results)) await send(RESTORE_LOCK_TIMEOUT);
          return CHECK_LOG;
        }
        for (const [key, token] of taken) tokens.set(key, token);
      }
      return { taken: true, tokens };
    } catch (error) {
      return busyOrThrow(error);
    }
  }

  /** Under a savepoint: a refusal rolls back to it, and the caller's transaction goes on. */
  takeJoined(runner: QueryRunner, targets: readonly LockTarget[], deadline: number): Promise<RowLockTake> {
    return this.underSavepoint(runner, (send) => this.takeOn(send, targets, deadline, false));
  }

  /**
   * Rare path: a key's row missing (its first use, or reaped), or one that says a lease holder may
   * be live. The rows are locked first (missing ones answered), then the lease holders of the keys
   * are read on the library's pool (see leaseHolders), then the keys are taken, writers setting the
   * one-statement path's marker. Under a savepoint: the rare path runs in joined transactions too,
   * and a refusal must not end them.
   */
  takeChecked(runner: QueryRunner, targets: readonly LockTarget[], deadline: number, acquisitionId: string): Promise<RowLockTake> {
    return this.underSavepoint(runner, (send) => this.takeCheckedOn(send, targets, deadline, acquisitionId));
  }

  private async takeCheckedOn(send: Send, targets: readonly LockTarget[], deadline: number, acquisitionId: string): Promise<RowLockTake> {
    try {
      const current = new Map<string, number>();
      for (const group of groupsOf(targets)) {
        const waitMs = waitLeft(deadline);
        const queue = queueStatements(group, waitMs);
        const lock = bounded([...queue, lockRowsStatement(group, waitMs)], waitMs);
        const locked = (await send(lock.sql))[lock.offset + queue.length];
        for (const row of locked!.rows as { lock_key: Buffer; fencing_token: string }[])
          current.set(keyText(row.lock_key), Number(row.fencing_token));
      }
      if (current.size < targets.length) return { taken: false, why: 'missing-key-rows' };
      if ((await this.leaseHolders(targets, acquisitionId)) > 0) return { taken: false, why: 'lease-holder' };
      const tokens = new Map<string, number>();
      for (const group of groupsOf(targets)) {
        if (group.mode === 'read') for (const stored of group.stored) tokens.set(stored, current.get(stored)!);
        else {
          const [bumped] = await send(bumpStatement(group.keys, true));
          for (const row of bumped!.rows as { lock_key: Buffer; fencing_token: string }[])
            tokens.set(keyText(row.lock_key), Number(row.fencing_token));
        }
      }
      return { taken: true, tokens };
    } catch (error) {
      return busyOrThrow(error);
    }
  }

  /**
   * The live lease holders the targets conflict with, read where the caller's transaction (its
   * snapshot may be older than the rows' locks) cannot hide them: on the library's pool, in a
   * transaction of its own, after the holders whose lease ran out were taken over (ended EXPIRED,
   * their processes told, so their fences refuse). No lease grant of these keys can commit
   * meanwhile: it needs the key rows, which the caller's transaction holds.
   */
  private async leaseHolders(targets: readonly LockTarget[], acquisitionId: string): Promise<number> {
    const conflict = conflictingHolders(targets);
    const sql = [
      'BEGIN ISOLATION LEVEL READ COMMITTED',
      ...takeoverStatements(conflict, `taken over by row-lock ${acquisitionId}`),
      `SELECT count(*)::int AS live FROM ${LOCK_LOG_TABLE} g WHERE ${conflict} AND g.status IN ${LIVE_STATUSES_SQL}`,
      'COMMIT',
    ].join(';\n');
    const results = await this.log.withRetries(() => this.log.pool.query(sql, 'locks'));
    return Number((results[results.length - 2]!.rows[0] as { live: number }).live);
  }

  /**
   * Apart from the joined transaction, in one committed statement on the library's pool (no gap
   * lock of the caller's can hold it up on PostgreSQL). Created inside the caller's transaction, the
   * rows would keep the fencing floor's shared lock, which their creation reads, until that
   * transaction ends: the janitor's reap, which takes the floor exclusively, would reap nothing
   * for as long, and other processes would find the key's row missing rather than locked. A row
   * another transaction created and has not committed is left to it (see createKeyRows): the take
   * that follows answers the key busy.
   */
  async createKeyRowsIn(_runner: QueryRunner, keys: readonly Buffer[], deadline: number): Promise<RowLockTake | undefined> {
    await this.log.createKeyRows(keys, Number.isFinite(deadline) ? deadline : undefined);
    return undefined;
  }

  async recordInCommit(runner: QueryRunner, rows: readonly RowLockAuditRow[]): Promise<void> {
    await this.transactions.ending(runner, insertAuditRows(rows, this.log.holder));
  }

  /** The audit rows and COMMIT in one round trip: a failed INSERT stops the batch before COMMIT. */
  async recordAndCommit(runner: QueryRunner, rows: readonly RowLockAuditRow[]): Promise<void> {
    const sent = this.transactions.commitVia(runner, `${insertAuditRows(rows, this.log.holder)};\nCOMMIT`);
    if (sent) return sent;
    await this.recordInCommit(runner, rows);
    await this.transactions.commit(runner);
  }

  recordEnded(rows: readonly RowLockAuditRow[]): Promise<void> {
    return this.log.recordEnded(rows);
  }

  cutSession(runner: QueryRunner): Promise<void> {
    return this.transactions.cut(runner);
  }

  cutSessionsGone(): Promise<void> {
    return this.transactions.cutsGone();
  }

  watchSession(runner: QueryRunner, onClose: (error?: unknown) => void): () => void {
    return watchSession(runner, onClose);
  }

  /**
   * Runs `work` under a savepoint, set in front of its first statement (no round trip of its own); a
   * refused take rolls back to it, leaving the caller's transaction as it was. A take that went
   * through keeps it until the transaction ends (releasing it would cost a round trip and change
   * nothing: its work commits or rolls back with the transaction's).
   *
   * A deadlock is not rolled back to the savepoint: the transaction would go on holding the rows it
   * locked before (a joined take's outer keys), the other transaction of the cycle would go on
   * waiting for them, and every retry would close the same cycle until both callers' budgets ran
   * out. It is answered 'rolled-back', as InnoDB's rollback of the whole transaction is on MySQL:
   * the caller cuts a joined take's session (its locks lost, see takeKeys) or rolls back its own.
   */
  private async underSavepoint<T extends RowLockTake | undefined>(runner: QueryRunner, work: (send: Send) => Promise<T>): Promise<T | RowLockTake> {
    const result = await work(batchesOn(runner, `SAVEPOINT ${TAKE_SAVEPOINT}`));
    if (result === undefined || result.taken || result.why === 'rolled-back') return result;
    await sessionQuery(runner, `ROLLBACK TO SAVEPOINT ${TAKE_SAVEPOINT}; RELEASE SAVEPOINT ${TAKE_SAVEPOINT}`);
    return result;
  }
}

/** A deadlock: the transaction is gone (the caller asks again). A lock wait cut short or a serialization failure: busy. */
function busyOrThrow(error: unknown): RowLockTake {
  if (sqlStateOf(error) === DEADLOCK_DETECTED) return { taken: false, why: 'rolled-back', cause: error };
  const kind = LockStatementError.from(error).kind;
  if (kind === 'retry' || kind === 'interrupted') return { taken: false, why: 'busy', cause: error };
  throw error;
}
