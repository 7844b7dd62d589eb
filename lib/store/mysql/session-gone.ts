import { setTimeout as sleep } from 'node:timers/promises';
import { backoffDelay } from '../../core/backoff.js';
import { ANSWER_BOUND_MS } from './lock-connection-pool.js';
import { format } from './sql.js';
import type { StatementPlan } from './statement-plan.js';

/** How often the server's session list is read while a cut session still runs its statement (backoff bounds, ms). */
const POLL_MS = { least: 5, most: 50 };

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
 * Resolves once the server no longer lists the cut session, or after ANSWER_BOUND_MS; never
 * rejects (a read that fails ends the wait: the pool is closing, or the list cannot be read).
 *
 * A session closed by its client under a running statement goes on, with its row locks, until
 * that statement ends: the server notices the closed socket only when it next reads or writes it.
 * So the session is killed, once, but only when the server lists it under our client port: behind
 * a proxy the thread id would be the proxy's session, possibly another client's, and then the wait
 * lasts until the statement ends. A kill the server refuses (another user's thread) is a wait too.
 */
export async function sessionGone(cut: CutConnection, read: <T>(plan: StatementPlan<T>) => Promise<T>): Promise<void> {
  if (typeof cut.threadId !== 'number') return;
  const port = cut.localPort === undefined ? null : String(cut.localPort);
  const look: StatementPlan<{ listed: boolean; ours: boolean }> = {
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
  let killed = false;
  const stop = performance.now() + ANSWER_BOUND_MS;
  for (let reads = 0; performance.now() < stop; reads++) {
    const seen = await read(look).catch(() => ({ listed: false, ours: false }));
    if (!seen.listed) return;
    if (seen.ours && !killed) {
      killed = true;
      await read(kill).catch(() => undefined);
      continue;
    }
    await sleep(backoffDelay(reads, POLL_MS.least, POLL_MS.most));
  }
}
