import { setTimeout as sleep } from 'node:timers/promises';
import { backoffDelay } from '../core/backoff.js';
import { ANSWER_BOUND_MS } from './answer-bound.js';

/** How often the server's session list is read while a cut session still runs its statement (backoff bounds, ms). */
const POLL_MS = { least: 5, most: 50 };

/** What the server's session list says of a cut session. */
export interface SessionSeen {
  readonly listed: boolean;
  /** Listed under our client port: surely ours, not a proxy's or another client's. */
  readonly ours: boolean;
}

/**
 * Resolves once the server no longer lists a cut session, or after ANSWER_BOUND_MS; never rejects
 * (a read that fails ends the wait: the pool is closing, or the list cannot be read).
 *
 * A session closed by its client under a running statement goes on, with its row locks, until that
 * statement ends: the server notices the closed socket only when it next reads or writes it. So the
 * session is ended on the server (`end`), once, but only when it is listed under our client port:
 * behind a proxy the server's session id would be the proxy's, possibly another client's, and then
 * the wait lasts until the statement ends. An end the server refuses is a wait too.
 */
export async function awaitSessionGone(look: () => Promise<SessionSeen>, end: () => Promise<unknown>): Promise<void> {
  let ended = false;
  const stop = performance.now() + ANSWER_BOUND_MS;
  for (let reads = 0; performance.now() < stop; reads++) {
    const seen = await look().catch(() => ({ listed: false, ours: false }));
    if (!seen.listed) return;
    if (seen.ours && !ended) {
      ended = true;
      await end().catch(() => undefined);
      continue;
    }
    await sleep(backoffDelay(reads, POLL_MS.least, POLL_MS.most));
  }
}
