import type { LockSession } from '../mysql/lock-connection-pool.js';
import { LockStatementError } from '../mysql/lock-statement.error.js';
import { runOneByOne } from '../mysql/statement-plan.js';
import { confirmGrantPlan, type GrantOutcome } from './grant.sql.js';
import { abandonPlan } from './hold.sql.js';

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
    if (found > 0) await runOneByOne(session, abandonPlan(acquisitionId, processId, 'given back: the grant did not commit whole'));
    return { granted: false, reason: 'busy' };
  } catch (error) {
    const failure = LockStatementError.from(error);
    if (failure.outcomeUnknown) throw failure;
    throw new LockStatementError('connection-lost', failure.driverError, `A committed grant could not be read back (${failure.message}); it is given back`);
  }
}
