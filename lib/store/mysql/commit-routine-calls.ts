import type { QueryRunner } from 'typeorm';
import { type CommitRoutine, isRoutineUnusable } from './commit-routines.sql.js';
import type { MysqlSessionTransactions } from './session-transaction.js';

/**
 * Commits through the commit routines (see commit-routines.sql.ts) where they can be used: installed,
 * callable, and COMMIT going straight to mysql2 (no TypeORM subscriber listening to transaction
 * events, which a CALL would not tell). A routine whose CALL is refused before it runs is not tried
 * again by this process.
 */
export class CommitRoutineCalls {
  private readonly usable: Set<CommitRoutine>;

  constructor(
    installed: ReadonlySet<CommitRoutine>,
    private readonly transactions: MysqlSessionTransactions,
  ) {
    this.usable = new Set(installed);
  }

  /**
   * Sends `call()`, a CALL of `routine` that commits `runner`'s transaction: true once it committed;
   * false when nothing was done and the caller must end the hold and COMMIT apart. An error the
   * routine raised (its end refused, a failed statement) is thrown: nothing was committed.
   */
  async commit(runner: QueryRunner, routine: CommitRoutine, call: () => string): Promise<boolean> {
    if (!this.usable.has(routine)) return false;
    try {
      return await this.transactions.commitVia(runner, call());
    } catch (error) {
      if (!isRoutineUnusable(error)) throw error;
      this.usable.delete(routine);
      return false;
    }
  }
}
