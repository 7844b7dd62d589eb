import type { DataSource, QueryRunner } from 'typeorm';
import type { SessionTransactions } from '../lock-store.js';
import { commitAnswerBy, sessionQuery } from './session-query.js';
import { markClosed, markOpened, mayCommitStraight, mayOpenStraight, transactionEventsObserved } from '../session-state.js';

/**
 * Opens and commits the library's own transactions on the app's DataSource (a row-lock hold, a
 * fenced call) as TypeORM's startTransaction() and commitTransaction() do: the isolation level
 * (the caller's, else the DataSource's), START TRANSACTION, COMMIT, and the runner marked as
 * TypeORM marks it, so a ROLLBACK or a nested call through TypeORM finds it in the same state.
 * While no subscriber of the DataSource listens to transaction events, nobody can hear them, and
 * the statements go straight to mysql2 (see sessionQuery); otherwise through TypeORM. (Query
 * events do not count: like the lock's own statements, START and COMMIT are then sent past them.)
 */
export class MysqlSessionTransactions implements SessionTransactions {
  constructor(private readonly dataSource: DataSource) {}

  async begin(runner: QueryRunner, isolationLevel?: string): Promise<void> {
    if (this.observed() || !mayOpenStraight(runner)) {
      await runner.startTransaction(isolationLevel as Parameters<QueryRunner['startTransaction']>[0]);
      return;
    }
    const level = isolationLevel ?? (this.dataSource.options as { isolationLevel?: string }).isolationLevel;
    if (level) await sessionQuery(runner, `SET TRANSACTION ISOLATION LEVEL ${level}`);
    await sessionQuery(runner, 'START TRANSACTION');
    markOpened(runner);
  }

  /**
   * Opens the transaction by sending `statement` (a CALL that starts it) straight to mysql2, as
   * begin() does; undefined (nothing sent) where it must open through TypeORM or the runner is
   * already in one. The runner is marked in a transaction before the statement goes, so that a
   * failure part-way (a lock wait that ran out after START) is rolled back by the caller's usual
   * ROLLBACK; `notBegun` unmarks it when the statement surely started nothing.
   *
   * This and commitVia answer with the statement's own promise, not from an async function: they
   * are on every row-lock hold's path, where each async layer costs a frame and microtask hops.
   */
  beginVia<T>(runner: QueryRunner, statement: string): Promise<T> | undefined {
    if (this.observed() || !mayOpenStraight(runner)) return undefined;
    markOpened(runner);
    return sessionQuery<T>(runner, statement);
  }

  /** The statement beginVia sent was refused before it ran: no transaction was opened. */
  notBegun(runner: QueryRunner): void {
    markClosed(runner);
  }

  commit(runner: QueryRunner): Promise<void> {
    return this.commitVia(runner, 'COMMIT') ?? runner.commitTransaction();
  }

  /**
   * Commits by sending `statement` (COMMIT, or a CALL that commits) straight to mysql2; undefined
   * (nothing sent) where the commit must go through TypeORM. The runner is marked committed only
   * if the statement succeeded.
   */
  commitVia(runner: QueryRunner, statement: string): Promise<void> | undefined {
    if (this.observed() || !mayCommitStraight(runner)) return undefined;
    return sessionQuery(runner, statement, commitAnswerBy()).then(() => markClosed(runner));
  }

  private observed(): boolean {
    return transactionEventsObserved(this.dataSource);
  }
}
