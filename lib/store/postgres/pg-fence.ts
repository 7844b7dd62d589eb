import type { QueryRunner } from 'typeorm';
import { fenceEndingInCommit } from '../ended-in-commit.js';
import type { KnownFreeKeys } from '../known-free-keys.js';
import type { FenceStore } from '../lock-store.js';
import { LockStatementError } from '../lock-statement.error.js';
import { DEADLOCK_DETECTED, sqlStateOf } from './pg-failures.js';
import { insideSavepoint } from '../session-state.js';
import type { PgSessionTransactions } from './pg-session.js';
import { LIVE_STATUSES_SQL, LOCK_LOG_TABLE, LockStatus, msSince, NOW, rowIdLiteral, textLiteral } from './pg-sql.js';

/** division_by_zero: how endAndCommit's batch stops before its COMMIT when the row was no longer live. */
const NOT_LIVE = '22012';

/**
 * The fence on PostgreSQL, inside the business transaction just before COMMIT: the lock's log rows
 * are written in the transaction that commits the work. A takeover must write the same rows (to
 * EXPIRED), so their row locks order the two: either the takeover waits for our COMMIT and then
 * finds the rows ended, or our UPDATE (after waiting for the takeover's, it reads the row's newest
 * version) finds fewer live rows than the lock holds, and the caller rolls back. Each statement also
 * checks the rows' owner (the acquisition id): a row id alone could name a newer holder's row after
 * a failover to a replica that never received the grant. `knownFree` learns of the rows a commit
 * ended once it succeeded (see fenceEndingInCommit).
 */
export function pgFence(transactions: PgSessionTransactions, knownFree: KnownFreeKeys): FenceStore {
  const fence: FenceStore = {
    ...fenceEndingInCommit(transactions, knownFree, (runner, rowIds, owner) => written(transactions, runner, endInCommitStatement(rowIds, owner))),
    endAndCommit: async (runner, rowId, owner) => {
      // One round trip: the row ended, then a statement that fails (stopping the batch before COMMIT,
      // with the transaction still open for the caller's rollback) when that ended nothing.
      const ended = endInCommitStatement([rowId], owner);
      const sent = transactions.commitVia(runner, `WITH ended AS (${ended} RETURNING 1) SELECT 1 / count(*)::int FROM ended;\nCOMMIT`);
      if (sent === undefined) {
        if ((await fence.endInCommit(runner, [rowId], owner)) < 1) return false;
        await fence.commit(runner);
        return true;
      }
      try {
        await sent;
        knownFree.ended([rowId], 1);
        return true;
      } catch (error) {
        if (sqlStateOf(LockStatementError.from(error).driverError) === NOT_LIVE) return false;
        throw error;
      }
    },
    fenceKept: (runner, rowIds, owner) => written(transactions, runner, fenceKeptStatement(rowIds, owner)),
    // A failed statement leaves PostgreSQL's transaction aborted, not rolled back: later statements
    // fail, none runs outside it. A deadlock outside any savepoint of the work (TypeORM's nested
    // transactions are savepoints) is told all the same, as on MySQL: nothing can recover that
    // transaction, so its locks are lost now (the session is cut, its row locks go, its signal
    // aborts) and the call fails with LockLostError whose cause is the deadlock, even if the work
    // caught it. Inside a savepoint the work may roll back to it and go on.
    rollsBackTransaction: (error: unknown, runner: QueryRunner) => sqlStateOf(error) === DEADLOCK_DETECTED && !insideSavepoint(runner),
    cutSession: (runner: QueryRunner) => void transactions.cut(runner).catch(() => undefined),
  };
  return fence;
}

async function written(transactions: PgSessionTransactions, runner: QueryRunner, sql: string): Promise<number> {
  return (await transactions.ending(runner, sql))[0]?.rowCount ?? 0;
}

/** The lock ends with this commit: its live rows become RELEASED in the transaction that commits the work. */
function endInCommitStatement(rowIds: readonly string[], owner: string): string {
  return (
    `UPDATE ${LOCK_LOG_TABLE} SET status = '${LockStatus.RELEASED}', ended_at = ${NOW}, hold_ms = ${msSince('acquired_at')} ` +
    `WHERE id IN (${rowIds.map(rowIdLiteral).join(', ')}) AND status IN ${LIVE_STATUSES_SQL} AND owner = ${textLiteral(owner)}`
  );
}

/**
 * The lock outlives the commit (an outer hold keeps it): its rows stay live but are written all the
 * same (COMPLETED, one more fenced commit), never merely read, so a takeover is ordered against us.
 */
export function fenceKeptStatement(rowIds: readonly string[], owner: string): string {
  return (
    `UPDATE ${LOCK_LOG_TABLE} SET status = '${LockStatus.COMPLETED}', fenced_count = fenced_count + 1 ` +
    `WHERE id IN (${rowIds.map(rowIdLiteral).join(', ')}) AND status IN ${LIVE_STATUSES_SQL} AND owner = ${textLiteral(owner)}`
  );
}
