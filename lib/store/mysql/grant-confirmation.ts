import type { LockSession } from './lock-connection-pool.js';
import { LockStatementError } from '../lock-statement.error.js';
import { runOneByOne } from './statement-plan.js';
import type { GrantOutcome } from './grant.sql.js';
import type { GrantedRow } from '../../core/held-lock.js';
import { format, LOCK_LOG_TABLE, LockStatus, rowsOf } from './sql.js';
import type { StatementPlan } from './statement-plan.js';
import { giveBackPlan } from './hold.sql.js';

/**
 * Multi-primary cluster: a grant counts only once its rows are read back after COMMIT, on the
 * connection that committed it (another connection may sit on a node that has not applied the
 * commit yet, and would find nothing). Every row must be there, live, with the token the grant
 * read; otherwise whatever is there is given back on that same connection and the try reports
 * "not granted".
 *
 * If the read-back or that give-back fails, the COMMIT had answered OK, so rows may exist: the
 * failure is reported with an unknown outcome, and the caller gives the acquisition back.
 */
export async function confirmOnSession(session: LockSession, acquisitionId: string, processId: string, outcome: GrantOutcome): Promise<GrantOutcome> {
  if (!outcome.granted) return outcome;
  try {
    const { confirmed, found } = await runOneByOne(session, confirmGrantPlan(acquisitionId, outcome.rows));
    if (confirmed) return outcome;
    if (found > 0) await runOneByOne(session, giveBackPlan(acquisitionId, processId, 'given back: the grant did not commit whole'));
    return { granted: false, reason: 'busy' };
  } catch (error) {
    const failure = LockStatementError.from(error);
    if (failure.outcomeUnknown) throw failure;
    throw new LockStatementError(
      'connection-lost',
      failure.driverError,
      `A committed grant could not be read back (${failure.message}); it is given back`,
    );
  }
}

/**
 * After COMMIT, on a multi-primary cluster: what really committed. Granted only if every key has
 * exactly this acquisition's live row with the token the grant read back.
 */
export function confirmGrantPlan(acquisitionId: string, rows: readonly GrantedRow[]): StatementPlan<{ confirmed: boolean; found: number }> {
  return {
    statements: [
      format(`SELECT id, lock_key, fencing_token, status FROM ${LOCK_LOG_TABLE} WHERE id IN (?) AND owner = ?`, [
        rows.map((r) => r.id),
        acquisitionId,
      ]),
    ],
    parse: (results) => {
      const found = rowsOf(results[0]);
      const confirmed =
        found.length === rows.length &&
        rows.every((row) =>
          found.some((f) => String(f.id) === row.id && Number(f.fencing_token) === row.fencingToken && f.status === LockStatus.ACQUIRED),
        );
      return { confirmed, found: found.length };
    },
  };
}
