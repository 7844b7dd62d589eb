import { awaitSessionGone, type SessionSeen } from '../await-session-gone.js';
import { format } from './sql.js';
import type { StatementPlan } from './statement-plan.js';

/** A cut connection's server session: its thread id, and the client port the server lists it under. */
export interface CutConnection {
  readonly threadId?: number | null;
  readonly localPort?: number;
}

/** The session of a mysql2 connection, read before it is cut (its socket forgets its port once destroyed). */
export function cutConnectionOf(connection: unknown): CutConnection {
  const c = connection as { threadId?: number | null; stream?: { localPort?: number } } | undefined;
  return { threadId: c?.threadId, localPort: c?.stream?.localPort };
}

/**
 * Resolves once the server no longer lists the cut session, or after a bound (see
 * awaitSessionGone); a session it lists under our client port is killed, once.
 */
export function sessionGone(cut: CutConnection, read: <T>(plan: StatementPlan<T>) => Promise<T>): Promise<void> {
  if (typeof cut.threadId !== 'number') return Promise.resolve();
  const port = cut.localPort === undefined ? null : String(cut.localPort);
  const look: StatementPlan<SessionSeen> = {
    statements: [
      format(
        "SELECT COUNT(*) AS listed, COALESCE(SUM(SUBSTRING_INDEX(HOST, ':', -1) = ?), 0) AS ours FROM information_schema.PROCESSLIST WHERE ID = ?",
        [port, cut.threadId],
      ),
    ],
    parse: ([rows]) => {
      const row = (rows as { listed: number | string; ours: number | string }[])[0];
      return { listed: Number(row?.listed ?? 0) > 0, ours: Number(row?.ours ?? 0) > 0 };
    },
  };
  const kill: StatementPlan<void> = { statements: [format('KILL ?', [cut.threadId])], parse: () => undefined };
  return awaitSessionGone(
    () => read(look),
    () => read(kill),
  );
}
