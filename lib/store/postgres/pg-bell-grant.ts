import { ANSWER_BOUND_MS } from '../answer-bound.js';
import { LockStatementError } from '../lock-statement.error.js';
import type { GrantAnswer, GrantRequest } from '../lock-store.js';
import type { PgBell, PgBellRequest } from './pg-doorbells.js';
import { GRANT_STATEMENTS } from './pg-grant-decision.sql.js';
import { grantBatch } from './pg-grant.sql.js';
import { bellGrantBatch } from './pg-bell-grant.sql.js';
import { grantLease, grantOnPool, type LeaseGrantHost, nextSteps } from './pg-lease-grant.js';
import { LOCK_WAIT_MS } from './pg-sql.js';
import { endRowsStatement } from './pg-log-rows.sql.js';
import type { EndStatus, LockStatus } from '../../core/lock-status.js';

/** Whether this session holds an advisory lock: asked after a batch whose bell wait may have stopped it. */
const HOLDS_BELL = `SELECT count(*)::int AS got FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND granted`;

/**
 * A grant after a doorbell wait, in one round trip on the bell's session: the wait, then the grant
 * in one statement (bellGrantBatch; a refusal sends the full grant, grantBatch, which says why). The
 * holder that rang has let go, so the next in line is usually granted at once. A wait that timed out, or a grant that failed after it, stops the batch: the session then says
 * whether it holds the bell (one more round trip, rare) and the grant goes on through the bell if
 * it does, else on the pool with the turn check. A first use of the key or expired holders go on
 * on the bell's session too (grantLease).
 * @returns the outcome, and the wait's result (`before`: undefined if unknown).
 */
export async function grantAfterBell(
  host: LeaseGrantHost,
  request: GrantRequest,
  wait: PgBellRequest,
  deadline: number,
  serverBoundMs: number,
): Promise<GrantAnswer> {
  const startedAt = performance.now();
  const channel = wait.connection;
  const left = () => serverBoundMs - (performance.now() - startedAt);
  // The grant's own row-lock wait is what the budget leaves after the bell's.
  const grantWaitMs = Math.max(1, Math.min(LOCK_WAIT_MS, serverBoundMs - wait.waitMs));
  const input = { request, holder: host.holder, processId: host.processId, waitMs: grantWaitMs };
  const oneStatement = oneStatementGrant(request);
  const batch = oneStatement ? bellGrantBatch(input) : grantBatch(input, { createKeyRows: false, takeover: false });
  let before: unknown;
  try {
    const results = await channel.query(
      `${wait.statements.join(';\n')};\n${batch.sql}`,
      answerWithin(deadline),
      oneStatement ? undefined : GRANT_STATEMENTS,
    );
    before = results[wait.resultAt];
    const answer = batch.parse(results.slice(wait.statements.length));
    // Refused in one statement: the full grant decides, and says why.
    if (oneStatement && !answer.granted) return { ...(await grantLease(host, request, deadline, left(), { channel })), before };
    const steps = nextSteps({ createKeyRows: false, takeover: false }, answer);
    if (steps === undefined) return { ...answer, before };
    return { ...(await grantLease(host, request, deadline, left(), { channel, steps })), before };
  } catch (error) {
    if (before !== undefined) throw error; // the grant's rare path failed: its own error
    const failure = LockStatementError.from(error);
    if (failure.outcomeUnknown || failure.kind === 'interrupted') void host.giveBack(request.acquisitionId).catch(() => undefined);
    if (failure.kind === 'connection-lost' || failure.kind === 'other' || failure.outcomeUnknown) throw failure;
    // Rolled back (see PgLockPool.send), and nothing granted: does the session hold the bell?
    const [held] = await channel.query(HOLDS_BELL, answerWithin(deadline));
    const got = Number(held!.rows[0]?.got) > 0;
    const answer = got
      ? await grantLease(host, request, deadline, left(), { channel })
      : await grantOnPool(host, request, deadline, left(), wait.name);
    return { ...answer, before: { rows: [{ got: got ? 1 : 0, waited_us: 0 }] } };
  }
}

/**
 * A release by the holder of the key's bell: the end, its COMMIT and the ring in one round trip on
 * the bell's session. The COMMIT goes before the ring: statements of one simple query share one
 * implicit transaction, committed at its end, while an advisory unlock acts at once, so the waiter it
 * wakes would grant in a snapshot where this holder is still live, be refused, and poll. Undefined
 * when that round trip failed: the session is closed (which frees the bell), and the caller sends
 * the release on the pool.
 */
export async function releaseThroughBell(
  bell: PgBell,
  rowIds: readonly string[],
  status: EndStatus | typeof LockStatus.EXPIRED,
  note: string | undefined,
  heldMs: number | undefined,
): Promise<number | undefined> {
  try {
    const [ended] = await bell.connection.query(
      `${endRowsStatement(rowIds, status, note, heldMs)};\nCOMMIT;\n${bell.ringStatement}`,
      ANSWER_BOUND_MS,
    );
    bell.rungWith(true);
    return ended!.rowCount ?? 0;
  } catch {
    bell.rungWith(false);
    return undefined;
  }
}

/** Whether a bell's grant goes as one statement (bellGrantBatch): a single key, written, not a semaphore's permit. */
function oneStatementGrant(request: GrantRequest): boolean {
  const target = request.targets.length === 1 ? request.targets[0]! : undefined;
  return target !== undefined && target.mode === 'write' && target.semaphoreLimit === undefined;
}

function answerWithin(deadline: number): number {
  return Math.max(1, Math.min(ANSWER_BOUND_MS, deadline - performance.now()));
}
