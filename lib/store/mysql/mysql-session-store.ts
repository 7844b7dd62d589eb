import type { QueryRunner } from 'typeorm';
import type { LockTarget } from '../../core/lock-key.js';
import type { FenceStore, RowLockAuditRow, RowLockStore, RowLockTake } from '../lock-store.js';
import { BEGIN_AND_TAKE, callEndAndCommit, callRecordAndCommit, END_AND_COMMIT, isLostSignal, RECORD_AND_COMMIT } from './session-routines.sql.js';
import type { SessionRoutineCalls } from './session-routine-calls.js';
import { classify, ER_LOCK_DEADLOCK, errnoOf } from './errno.js';
import { endInCommitStatement, fenceKeptStatement } from './hold.sql.js';
import { fenceEndingInCommit } from '../ended-in-commit.js';
import type { KnownFreeKeys } from '../known-free-keys.js';
import type { MysqlLockLog } from './mysql-lock-log.js';
import { createKeyRowsStatements } from './key-rows.sql.js';
import { boundedInStatement, claimTokens, insertAuditRows, leaseHoldersCheck, leaseHoldersOf } from './row-lock.sql.js';
import { beginAndTakeCall, takeKeys, takeKeysChecked, takenByCall } from './row-lock-grant.js';
import { format } from './sql.js';
import { commitAnswerBy, type ResultHeader, sessionQuery } from './session-query.js';
import type { MysqlSessionTransactions } from './session-transaction.js';
import { FENCING_FLOOR_KEY } from '../../core/internal-keys.js';
import { cutSession, isNoWait } from './row-lock-session.js';
import { cutConnectionOf, sessionGone } from './session-gone.js';
import { KeyRowsFirst } from './key-rows-first.js';

/**
 * The fence's writes, in the business transaction on the app's DataSource. `knownFree` learns of
 * the rows a commit ended once it succeeded (see fenceEndingInCommit).
 */
export function mysqlFence(transactions: MysqlSessionTransactions, knownFree: KnownFreeKeys, routines: SessionRoutineCalls): FenceStore {
  const fence: FenceStore = {
    ...fenceEndingInCommit(transactions, knownFree, (runner, rowIds, owner) => written(runner, endInCommitStatement(rowIds, owner))),
    endAndCommit: async (runner, rowId, owner) => {
      let committed: boolean;
      try {
        committed = await routines.commit(runner, END_AND_COMMIT, () => callEndAndCommit(rowId, owner));
      } catch (error) {
        if (isLostSignal(error)) return false;
        throw error;
      }
      if (!committed) {
        if ((await fence.endInCommit(runner, [rowId], owner)) < 1) return false;
        await fence.commit(runner);
      } else knownFree.ended([rowId], 1);
      return true;
    },
    fenceKept: (runner, rowIds, owner) => written(runner, fenceKeptStatement(rowIds, owner)),
    rollsBackTransaction: (error: unknown) => errnoOf(error) === ER_LOCK_DEADLOCK,
    cutSession,
  };
  return fence;
}

async function written(runner: QueryRunner, statement: { sql: string; parameters: unknown[] }): Promise<number> {
  // Every matched row changes, so CLIENT_FOUND_ROWS on or off gives the same count.
  return Number((await sessionQuery<ResultHeader>(runner, format(statement.sql, statement.parameters), commitAnswerBy())).affectedRows);
}

/** Row-lock sessions on MySQL/MariaDB: InnoDB locks on the keys' rows of db_lock (see row-lock.sql.ts). */
export class MysqlRowLockStore implements RowLockStore {
  /** Cut sessions the server may still run (see sessionGone). */
  private readonly leaving = new Set<Promise<void>>();
  private readonly keyRowsFirst = new KeyRowsFirst(
    (plan, deadline) => this.log.run(plan, 'locks', deadline),
    (keys, deadline) => this.log.createKeyRows(keys, deadline),
  );

  constructor(
    private readonly log: MysqlLockLog,
    private readonly transactions: MysqlSessionTransactions,
    private readonly routines: SessionRoutineCalls,
  ) {}

  begin(runner: QueryRunner, isolationLevel?: string): Promise<void> {
    return this.transactions.begin(runner, isolationLevel);
  }

  commit(runner: QueryRunner): Promise<void> {
    return this.transactions.commit(runner);
  }

  beginAndTake(runner: QueryRunner, targets: readonly LockTarget[], deadline: number, isolationLevel?: string): Promise<RowLockTake> {
    const call = isolationLevel === undefined ? beginAndTakeCall(targets, deadline, this.log.flavor) : undefined;
    const sent = call === undefined ? undefined : this.routines.begin<unknown[]>(runner, BEGIN_AND_TAKE, () => call);
    if (!sent) return this.beginThenTake(runner, targets, deadline, isolationLevel);
    // One handler for both outcomes, no async frame: this is every row-lock hold's first statement.
    return sent.then(
      (answer) => (answer === undefined ? undefined : takenByCall(answer, targets)) ?? this.beginThenTake(runner, targets, deadline, isolationLevel),
      busyOrThrow,
    );
  }

  /** START, then the take: no routine to do both in one CALL, or one that answered nothing. */
  private async beginThenTake(runner: QueryRunner, targets: readonly LockTarget[], deadline: number, isolationLevel?: string): Promise<RowLockTake> {
    await this.transactions.begin(runner, isolationLevel);
    return this.take(runner, targets, deadline);
  }

  take(runner: QueryRunner, targets: readonly LockTarget[], deadline: number): Promise<RowLockTake> {
    return busyOnWait(() => takeKeys(runner, targets, deadline, this.log.flavor));
  }

  async takeJoined(runner: QueryRunner, targets: readonly LockTarget[], deadline: number): Promise<RowLockTake> {
    await this.keyRowsFirst.ensure(targets, deadline);
    return this.take(runner, targets, deadline);
  }

  takeChecked(runner: QueryRunner, targets: readonly LockTarget[], deadline: number, acquisitionId: string): Promise<RowLockTake> {
    const leaseHolders = async (): Promise<{ live: number; claimed?: ReadonlyMap<string, number> }> => {
      const claims = this.log.schema.claims ? claimTokens(targets, acquisitionId, this.log.holder) : [];
      const sql = leaseHoldersCheck(targets, acquisitionId, claims);
      // A duplicate claim (a lease grant took that token first) is a retry like a deadlock: sent again, the claim goes above it.
      const results = await this.log.withRetries('locks', () => this.log.pool.query<unknown[]>(sql, { purpose: 'locks' }));
      return leaseHoldersOf(results, claims.length > 0);
    };
    return busyOnWait(() => takeKeysChecked(runner, targets, deadline, this.log.flavor, leaseHolders));
  }

  /** Bounded by what is left of the budget where the server can bound it; undefined once created, else the failed take (see busyOrThrow). */
  createKeyRowsIn(runner: QueryRunner, keys: readonly Buffer[], deadline: number): Promise<RowLockTake | undefined> {
    return busyOnWait(async () => {
      for (const sql of createKeyRowsStatements(keys, FENCING_FLOOR_KEY, this.log.flavor.sharedLockClause)) {
        const left = deadline === Infinity ? Infinity : deadline - performance.now();
        await sessionQuery(runner, boundedInStatement(sql, this.log.flavor, left) ?? sql);
      }
      return undefined;
    });
  }

  async recordInCommit(runner: QueryRunner, rows: readonly RowLockAuditRow[]): Promise<void> {
    await sessionQuery(runner, insertAuditRows(rows, this.log.holder), commitAnswerBy());
  }

  recordAndCommit(runner: QueryRunner, rows: readonly RowLockAuditRow[]): Promise<void> {
    if (rows.length !== 1) return this.recordThenCommit(runner, rows);
    return this.routines
      .commit(runner, RECORD_AND_COMMIT, () => callRecordAndCommit(rows[0]!, this.log.holder))
      .then((committed) => (committed ? undefined : this.recordThenCommit(runner, rows)));
  }

  private async recordThenCommit(runner: QueryRunner, rows: readonly RowLockAuditRow[]): Promise<void> {
    await this.recordInCommit(runner, rows);
    await this.transactions.commit(runner);
  }

  async recordEnded(rows: readonly RowLockAuditRow[]): Promise<void> {
    const sql = insertAuditRows(rows, this.log.holder);
    await this.log.withRetries('locks', () => this.log.run({ statements: [sql], parse: () => undefined }, 'locks'));
  }

  cutSession(runner: QueryRunner): Promise<void> {
    const cut = cutConnectionOf((runner as unknown as { databaseConnection?: unknown }).databaseConnection);
    cutSession(runner);
    const gone = sessionGone(cut, (plan) => this.log.run(plan, 'admin')).finally(() => this.leaving.delete(gone));
    this.leaving.add(gone);
    return gone;
  }

  async cutSessionsGone(): Promise<void> {
    await Promise.all(this.leaving);
  }

  watchSession(runner: QueryRunner, onClose: (error?: unknown) => void): () => void {
    const connection = (runner as unknown as { databaseConnection?: NodeJS.EventEmitter }).databaseConnection;
    connection?.once('error', onClose);
    connection?.once('end', onClose);
    return () => {
      connection?.off('error', onClose);
      connection?.off('end', onClose);
    };
  }
}

/** NOWAIT, the wait bound or innodb_lock_wait_timeout: the key is held. A deadlock: the caller asks again. */
async function busyOnWait<T extends RowLockTake | undefined>(take: () => Promise<T>): Promise<T | RowLockTake> {
  try {
    return await take();
  } catch (error) {
    return busyOrThrow(error);
  }
}

/** A failed take: rolled back with its whole transaction (a deadlock), busy (see busyOnWait), or thrown. */
function busyOrThrow(error: unknown): RowLockTake {
  if (errnoOf(error) === ER_LOCK_DEADLOCK) return { taken: false, why: 'rolled-back', cause: error };
  const kind = classify(error);
  if (kind === 'retry' || kind === 'interrupted' || isNoWait(error)) return { taken: false, why: 'busy', cause: error };
  throw error;
}
