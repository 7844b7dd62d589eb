import type { QueryRunner } from 'typeorm';
import { type CommitRoutine, isRoutineUnusable, type SessionRoutine } from './session-routines.sql.js';
import type { MysqlSessionTransactions } from './session-transaction.js';

/**
 * Calls the session routines (see session-routines.sql.ts) where they can be used: installed,
 * callable, and the transaction's START and COMMIT going straight to mysql2 (no TypeORM subscriber
 * listening to transaction events, which a CALL would not tell). A routine whose CALL is refused
 * before it runs is not tried again by this process.
 */
export class SessionRoutineCalls {
  private readonly usable: Set<SessionRoutine>;

  constructor(
    installed: ReadonlySet<SessionRoutine>,
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
      if (!this.refused(routine, error)) throw error;
      return false;
    }
  }

  /**
   * Sends `call()`, a CALL of `routine` that opens `runner`'s transaction, and returns its answer;
   * undefined when nothing was done and the caller must open the transaction apart. An error once
   * the routine ran is thrown with the transaction marked open (the caller rolls it back).
   */
  async begin<T>(runner: QueryRunner, routine: SessionRoutine, call: () => string): Promise<T | undefined> {
    if (!this.usable.has(routine)) return undefined;
    try {
      return await this.transactions.beginVia<T>(runner, call());
    } catch (error) {
      if (!this.refused(routine, error)) throw error;
      this.transactions.notBegun(runner);
      return undefined;
    }
  }

  /** The CALL was refused before the routine ran (dropped, or not executable by the app's user): not called again. */
  private refused(routine: SessionRoutine, error: unknown): boolean {
    if (!isRoutineUnusable(error)) return false;
    this.usable.delete(routine);
    return true;
  }
}
