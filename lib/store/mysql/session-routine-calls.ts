import type { QueryRunner } from 'typeorm';
import { type CommitRoutine, isRoutineUnusable, type SessionRoutine } from './session-routines.sql.js';
import type { MysqlSessionTransactions } from './session-transaction.js';

/** The answers of a commit routine's call that was not sent, and that committed. */
const NOT_SENT = Promise.resolve(false);
const SENT = (): boolean => true;

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
  commit(runner: QueryRunner, routine: CommitRoutine, call: () => string): Promise<boolean> {
    const sent = this.usable.has(routine) ? this.transactions.commitVia(runner, call()) : undefined;
    if (!sent) return NOT_SENT;
    return sent.then(SENT, (error: unknown) => {
      if (!this.refused(routine, error)) throw error;
      return false;
    });
  }

  /**
   * Sends `call()`, a CALL of `routine` that opens `runner`'s transaction, and answers with its
   * result; undefined (nothing sent) when the caller must open the transaction apart, and a
   * promise of undefined when the routine was refused before it ran. An error once the routine
   * ran is thrown with the transaction marked open (the caller rolls it back). Neither is an
   * async function: both are on every row-lock hold's path (see MysqlSessionTransactions.beginVia).
   */
  begin<T>(runner: QueryRunner, routine: SessionRoutine, call: () => string): Promise<T | undefined> | undefined {
    const sent = this.usable.has(routine) ? this.transactions.beginVia<T>(runner, call()) : undefined;
    return sent?.catch((error: unknown) => {
      if (!this.refused(routine, error)) throw error;
      this.transactions.notBegun(runner);
      return undefined;
    });
  }

  /** The CALL was refused before the routine ran (dropped, or not executable by the app's user): not called again. */
  private refused(routine: SessionRoutine, error: unknown): boolean {
    if (!isRoutineUnusable(error)) return false;
    this.usable.delete(routine);
    return true;
  }
}
