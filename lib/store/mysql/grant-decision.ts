import { setTimeout as sleep } from 'node:timers/promises';
import { signalMarginMs } from '../../core/held-lock.js';
import { LockStatus } from './sql.js';
import { LockStatementError } from '../lock-statement.error.js';
import type { GrantAnswer, GrantRequest } from '../lock-store.js';
import { grantAfterBell } from './bell-grant.js';
import type { DedicatedConnection } from './dedicated-connection.js';
import type { BellRequest } from './doorbells.js';
import type { FastGrant } from './fast-grant.js';
import { type GrantInput, type GrantOutcome, leanGrantPlan, takeoverGrantPlan } from './grant.sql.js';
import { semaphorePlan } from './semaphore-grant.sql.js';
import { singleKeyGrantPlan } from './single-key-grant.sql.js';
import type { StatementPlan } from './statement-plan.js';

/** What deciding a grant needs from the lock log. */
export interface GrantDecisionHost {
  readonly fast: FastGrant;
  /** One plan on the doorbell's connection, the pool, or (cluster) one statement per round trip with its confirmation. */
  sendGrant(
    plan: StatementPlan<GrantOutcome>,
    input: Pick<GrantInput, 'acquisitionId' | 'connectBy'>,
    deadline: number,
    via?: DedicatedConnection,
    /** Told how long a connection opened for the round trip took: no bound counts it (see connection-opening.ts). */
    onOpened?: (ms: number) => void,
  ): Promise<GrantOutcome>;
  keyRowsPlan(keys: readonly Buffer[]): StatementPlan<void>;
  /** Ends whatever a grant of unknown outcome may have committed. */
  giveBack(acquisitionId: string, failure: LockStatementError): Promise<void>;
  /** Ends rows of this process (a grant that answered too late is given back with it). */
  endRows(rowIds: readonly string[], status: typeof LockStatus.RELEASED, note?: string): Promise<number>;
}

/**
 * The grant's input: the strategy's request, the granting process, and the server bound of each
 * statement (none when unbounded). Written out, not spread: a spread of the request cost more than
 * anything else on the grant's path.
 */
export function grantInputOf(
  request: GrantRequest,
  process: { readonly holder: string; readonly processId: string; readonly schema: { readonly claims?: boolean } },
  bound: GrantInput['statementLimit'],
): GrantInput {
  return {
    acquisitionId: request.acquisitionId,
    strategy: request.strategy,
    targets: request.targets,
    leaseMs: request.leaseMs,
    waitedMs: request.waitedMs,
    writerWaitMarkMs: request.writerWaitMarkMs,
    writerPreference: request.writerPreference,
    doorbell: request.doorbell,
    connectBy: request.connectBy,
    holder: process.holder,
    processId: process.processId,
    claims: process.schema.claims,
    statementLimit: bound && bound.ms !== Infinity ? bound : undefined,
  };
}

/** Where a decision starts: after a doorbell wait, on the bell's connection, or after a fast try that did not grant. */
export interface DecisionStart {
  readonly wait?: BellRequest;
  readonly via?: DedicatedConnection;
  /** Tries made before (the fast try: 1). */
  readonly tries: number;
  /** The fast try's failure, handled as any try's. */
  readonly failure?: LockStatementError;
}

/**
 * The full plan: one key by `singleKeyGrantPlan`, several by `leanGrantPlan`, semaphores by theirs;
 * the rare work only when the answer reports it (missing key rows, expired holders). Deadlocks and
 * lock-wait timeouts are tried again at once, up to five tries: a free key must not look busy.
 */
export async function decideGrant(host: GrantDecisionHost, full: GrantInput, deadline: number, start: DecisionStart): Promise<GrantAnswer> {
  const { wait, via } = start;
  const firstPlan = () => semaphorePlan(full, false) ?? (full.targets.length === 1 ? singleKeyGrantPlan(full) : leanGrantPlan(full));
  let plan: StatementPlan<GrantOutcome> | undefined;
  let before: unknown;
  let failure = start.failure;
  const firstSentAt = performance.now();
  for (let attempt = start.tries; ; attempt++) {
    if (failure) {
      if (failure.kind === 'retry' && attempt <= 4) await sleep(1 + Math.random() * 4 * attempt);
      else {
        // Off the caller's path: a give-back that cannot finish now is owed, and sent before the next renewal.
        if (failure.kind !== 'retry') void host.giveBack(full.acquisitionId, failure).catch(() => undefined);
        throw failure;
      }
      failure = undefined;
    }
    let outcome: GrantOutcome;
    let sentAt = performance.now();
    try {
      if (wait && attempt === 0) {
        ({ outcome, before } = await grantAfterBell(full, wait, () => (plan ??= firstPlan()), host.fast.afterBell(full), deadline));
      } else {
        // Only a try's first round trip waits for a connection no later than `connectBy`: the rest go on with a try already sent.
        const input = attempt === 0 ? full : { acquisitionId: full.acquisitionId, connectBy: undefined };
        outcome = await host.sendGrant((plan ??= firstPlan()), input, deadline, via, (ms) => {
          deadline += ms;
          sentAt += ms;
        });
      }
    } catch (error) {
      failure = LockStatementError.from(error);
      continue;
    }
    // After a doorbell wait the caller adds the wait to the first send time and checks the lease.
    // Only a live holder or a waiting writer says the key is contended: a first use or a takeover does not.
    if (!outcome.granted && (outcome.reason === 'busy' || outcome.reason === 'writer-waiting')) host.fast.noteRefused(full);
    host.fast.knownFree.granted(full, outcome);
    if (outcome.granted) return before === undefined ? grantedInTime(host, full, outcome, sentAt) : { ...outcome, sentAt: firstSentAt, before };
    if (outcome.reason === 'missing-key-rows' && attempt < 4) {
      // First use of a key (or after the janitor reaped it): its rows in their own transaction, then the grant, one round trip.
      const create = host.keyRowsPlan(full.targets.map((t) => t.bytes));
      const again = firstPlan();
      plan = { statements: [...create.statements, ...again.statements], parse: (results) => again.parse(results.slice(create.statements.length)) };
      continue;
    }
    if (outcome.reason === 'expired-holders' && attempt < 4) {
      plan = semaphorePlan(full, true) ?? takeoverGrantPlan(full);
      continue;
    }
    return { ...outcome, before };
  }
}

/**
 * A grant that answered after its lease's local deadline (its COMMIT held up, e.g. for the
 * seconds a multi-primary cluster freezes when a node dies) is given back at once instead of
 * handed to a caller: the database may already count that lease as over, so the holder's
 * signal would have to abort before its work even started.
 */
export function grantedInTime(
  host: Pick<GrantDecisionHost, 'endRows'>,
  input: { readonly leaseMs: number },
  outcome: Extract<GrantOutcome, { granted: true }>,
  sentAt: number,
): GrantAnswer | Promise<GrantAnswer> {
  const localDeadline = sentAt + outcome.serverWaitMs + input.leaseMs - signalMarginMs(input.leaseMs);
  if (performance.now() < localDeadline)
    return {
      granted: true,
      rows: outcome.rows,
      reclaimed: outcome.reclaimed,
      serverWaitMs: outcome.serverWaitMs,
      serverStartedAt: outcome.serverStartedAt,
      sentAt,
    };
  const ids = outcome.rows.map((r) => r.id);
  return host.endRows(ids, LockStatus.RELEASED, 'given back: the grant answered after its lease had run out').then(
    () => ({ granted: false as const, reason: 'busy' as const }),
    () => ({ granted: false as const, reason: 'busy' as const }),
  );
}
