import type { DataSource, QueryRunner } from 'typeorm';

/**
 * The library's own transactions on the app's DataSource (row-lock holds, fenced calls) are opened
 * and committed straight on the runner's connection, past TypeORM's wrapper, and the runner is
 * marked as TypeORM's startTransaction() and commitTransaction() mark it, so a ROLLBACK or a nested
 * call through TypeORM finds it in the same state. While a subscriber of the DataSource listens to
 * transaction events they go through TypeORM instead, which calls it.
 */

/** The subscriber hooks TypeORM calls around a transaction. */
const TRANSACTION_EVENTS = [
  'beforeTransactionStart',
  'afterTransactionStart',
  'beforeTransactionCommit',
  'afterTransactionCommit',
  'beforeTransactionRollback',
  'afterTransactionRollback',
] as const;

/** TypeORM's own bookkeeping of a runner's transaction (BaseQueryRunner). */
interface RunnerState {
  isTransactionActive: boolean;
  transactionDepth?: number;
}

const stateOf = (runner: QueryRunner): RunnerState => runner as unknown as RunnerState;

/** Someone listens to the DataSource's transaction events: transactions must go through TypeORM. */
export function transactionEventsObserved(dataSource: DataSource): boolean {
  return dataSource.subscribers.some((subscriber) =>
    TRANSACTION_EVENTS.some((event) => typeof (subscriber as Record<string, unknown>)[event] === 'function'),
  );
}

/** The runner is in no transaction, so one may be opened straight on its connection. */
export function mayOpenStraight(runner: QueryRunner): boolean {
  const state = stateOf(runner);
  return !state.isTransactionActive && state.transactionDepth === 0;
}

/** The runner's one transaction (not nested) may be committed straight on its connection. */
export function mayCommitStraight(runner: QueryRunner): boolean {
  const state = stateOf(runner);
  return state.isTransactionActive && state.transactionDepth === 1;
}

/** The runner's work is inside a nested transaction of TypeORM's (a savepoint). */
export function insideSavepoint(runner: QueryRunner): boolean {
  return (stateOf(runner).transactionDepth ?? 0) > 1;
}

/** Marks the runner in a transaction (before the statement that opens it goes, so a failure part-way is rolled back as usual). */
export function markOpened(runner: QueryRunner): void {
  stateOf(runner).isTransactionActive = true;
  stateOf(runner).transactionDepth = 1;
}

/** Marks the runner out of its transaction (committed, or never opened after all). */
export function markClosed(runner: QueryRunner): void {
  stateOf(runner).isTransactionActive = false;
  stateOf(runner).transactionDepth = 0;
}
