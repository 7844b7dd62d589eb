import { setTimeout as sleep } from 'node:timers/promises';
import { ANSWER_BOUND_MS } from '../answer-bound.js';
import { LockStatementError } from '../lock-statement.error.js';
import type { GrantAnswer, GrantRequest } from '../lock-store.js';
import { grantBatch, type GrantSteps } from './pg-grant.sql.js';
import type pg from 'pg';
import { notSentInTime, type PgLockPool, type PreparedStatements } from './pg-pool.js';
import { LOCK_WAIT_MS } from './pg-sql.js';
import { LOCK_NOT_AVAILABLE, sqlStateOf } from './pg-failures.js';
import { GRANT_STATEMENTS } from './pg-grant-decision.sql.js';
import type { KnownFreeKeys } from '../known-free-keys.js';

/** Where a grant's round trips go: the library's pool, or a doorbell's session (see PgLockPool.query for the contract). */
export interface GrantChannel {
  query(sql: string, answerWithinMs: number, prepared?: PreparedStatements): Promise<pg.QueryResult[]>;
}

/** How a grant try is sent: `channel` (a connection taken for the grant: see grantOnPool), and the turn check of a doorbell it does not hold (see turnCheck). */
export interface GrantRoute {
  readonly channel: GrantChannel;
  readonly turn?: string;
  /** What the previous round trip found missing (a grant after a doorbell wait goes on from there). */
  readonly steps?: GrantSteps;
}

/** What a grant needs from the lock log. */
export interface LeaseGrantHost {
  readonly pool: PgLockPool;
  readonly holder: string;
  readonly processId: string;
  /** Keys this process knows free since its release (see KnownFreeKeys): told of every grant and every durable end. */
  readonly knownFree: KnownFreeKeys;
  /** Ends whatever a grant of unknown outcome may have committed. */
  giveBack(acquisitionId: string): Promise<void>;
}

/**
 * One grant try (see grantBatch): the common case one round trip; a first use of a key and a
 * takeover of expired holders one more each, only when the answer says so. A key row another
 * transaction keeps locked past the lock wait (a row-lock holder, or the app's own transaction
 * on the lock table) answers busy: the caller's queue asks again within its budget. Deadlocks are
 * tried again at once, up to five tries while the deadline allows. Each try's lock wait is what is
 * left of `serverBoundMs` (at most LOCK_WAIT_MS), so the server gives up before the client stops
 * waiting for its answer. A try whose outcome is unknown (its connection broke, its answer came
 * too late) is given back before the failure is thrown.
 */
export async function grantLease(
  host: LeaseGrantHost,
  request: GrantRequest,
  deadline: number,
  serverBoundMs = Infinity,
  route: GrantRoute,
): Promise<GrantAnswer> {
  const startedAt = performance.now();
  const channel = route.channel;
  let steps: GrantSteps = route.steps ?? { createKeyRows: false, takeover: false };
  let announced = false;
  for (let attempt = 0; ; attempt++) {
    const sentAt = performance.now();
    const waitMs = Math.min(LOCK_WAIT_MS, serverBoundMs - (sentAt - startedAt));
    if (attempt > 0 && waitMs <= 0) return { granted: false, reason: 'busy' };
    const batch = grantBatch({ request, holder: host.holder, processId: host.processId, waitMs: Math.max(1, waitMs), turn: route.turn }, steps);
    let answer: GrantAnswer;
    try {
      const answering = channel.query(batch.sql, Math.max(1, Math.min(ANSWER_BOUND_MS, deadline - sentAt)), GRANT_STATEMENTS);
      // pg writes an idle session's query within that call.
      if (!announced) request.onSent?.();
      announced = true;
      answer = batch.parse(await answering);
    } catch (error) {
      const failure = LockStatementError.from(error);
      // The channel rolled the transaction back: nothing was granted.
      if (sqlStateOf(failure.driverError) === LOCK_NOT_AVAILABLE) return { granted: false, reason: 'busy' };
      if (failure.kind === 'retry' && attempt < 4 && performance.now() < deadline) {
        await sleep(1 + Math.random() * 4 * (attempt + 1));
        continue;
      }
      if (failure.outcomeUnknown || failure.kind === 'interrupted') void host.giveBack(request.acquisitionId).catch(() => undefined);
      throw failure;
    }
    if (answer.granted) return attempt === 0 ? answer : { ...answer, sentAt };
    if (steps.knownFreeAt !== undefined) {
      // Someone was granted the key since our release: the full grant decides, as a first try
      // (its lock wait and the lease still count from the first send).
      host.knownFree.forget(request.targets[0]!.storedKey);
      steps = { ...steps, knownFreeAt: undefined };
      attempt = -1;
      continue;
    }
    if (attempt >= 4) return answer;
    const next = nextSteps(steps, answer);
    if (next === undefined) return answer;
    steps = next;
  }
}

/**
 * A grant on the pool: one connection taken for all its tries, waited for until the request's
 * `connectBy` (or OPEN_BOUND_MS when one is opened for it: see connection-opening.ts). The time an
 * open took counts in no bound of the grant: the answer's deadline moves by it, and the lock waits
 * are measured from the first send.
 */
export async function grantOnPool(
  host: LeaseGrantHost,
  request: GrantRequest,
  deadline: number,
  serverBoundMs: number,
  turn = request.doorbell,
): Promise<GrantAnswer> {
  const askedAt = performance.now();
  const { connection, openedMs } = await host.pool.acquireDedicated(Math.min(deadline, request.connectBy ?? Infinity), undefined, notSentInTime);
  const connectedAt = performance.now();
  try {
    const answer = await grantLease(host, request, deadline + openedMs, serverBoundMs, {
      channel: connection,
      turn,
      steps: knownFreeSteps(host, request),
    });
    // The lease starts when the row is written, after the connection came: counted from the
    // request instead, a long wait for it would hand back a grant as if it answered too late.
    return answer.granted && answer.sentAt === undefined && connectedAt - askedAt > 1 ? { ...answer, sentAt: connectedAt } : answer;
  } finally {
    connection.release();
  }
}

/** The one-statement grant's steps, for a single-key writer's grant of a key this process knows free. */
function knownFreeSteps(host: LeaseGrantHost, request: GrantRequest): GrantSteps | undefined {
  const target = request.targets.length === 1 ? request.targets[0]! : undefined;
  if (target === undefined || target.mode !== 'write' || target.semaphoreLimit !== undefined) return undefined;
  const knownFreeAt = host.knownFree.tokenOf(target.storedKey);
  return knownFreeAt === undefined ? undefined : { createKeyRows: false, takeover: false, knownFreeAt };
}

/** What the next try must do for a refusal that says what is missing; undefined when trying again would not help. */
export function nextSteps(steps: GrantSteps, answer: GrantAnswer): GrantSteps | undefined {
  if (answer.granted) return undefined;
  if (answer.reason === 'missing-key-rows') return { ...steps, createKeyRows: true };
  if (answer.reason === 'expired-holders' && !steps.takeover) return { ...steps, takeover: true };
  return undefined;
}
