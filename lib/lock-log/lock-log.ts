import { setTimeout as sleep } from 'node:timers/promises';
import { signalMarginMs } from '../core/held-lock.js';
import type { DedicatedConnection, LockConnectionPool, RoundTripPurpose } from '../mysql/lock-connection-pool.js';
import { LockStatementError } from '../mysql/lock-statement.error.js';
import type { ServerFlavor } from '../mysql/server-flavor.js';
import { type EndStatus, LockStatus, ROW_LOCK_TABLE } from '../mysql/sql.js';
import { runPlan, runPlanThen, type StatementPlan } from '../mysql/statement-plan.js';
import { confirmOnSession } from './grant-confirmation.js';
import { createKeyRowsPlan, type GrantInput, type GrantOutcome, leanGrantPlan, takeoverGrantPlan } from './grant.sql.js';
import {
  abandonPlan,
  endedAmongPlan,
  endProcessStatement,
  endRowsPlan,
  extendPlan,
  registerProcessStatement,
  renewProcessPlan,
  rowStatusesPlan,
} from './hold.sql.js';
import { FENCING_FLOOR_KEY } from './internal-keys.js';
import { checkSchema } from './schema-check.js';
import { UnendedRows } from './unended-rows.js';

/**
 * How long a release, extend or renewal keeps re-sending itself after deadlocks, lock-wait
 * timeouts or a broken connection (each of them is idempotent: conditional on the rows still
 * being live). Under heavy contention InnoDB may pick a release as the deadlock victim several
 * times in a row; giving up early would leave the key taken until its lease runs out.
 */
const RETRY_FOR_MS = 3_000;

/**
 * After a grant of unknown outcome, when to give it back a second time: by then the server has
 * surely finished the statement (every lock wait of the library's sessions is bounded to one
 * second), so a commit that landed after the first give-back is caught.
 */
const LATE_GIVE_BACK_MS = 2_500;

/**
 * The lock log as both strategies use it: grants, ends, renewals and checks on the log rows, on
 * the library's own pool, with their results parsed. Knows SQL and rows; knows nothing of waiting,
 * handles or call chains. On a multi-primary cluster every transaction goes one statement per
 * round trip and a grant counts only once its rows are read back after COMMIT.
 */
export class LockLog {
  private id: string | undefined;
  /** Rows a release or give-back could not end: ended before the next renewal (see UnendedRows). */
  private readonly unended = new UnendedRows();

  constructor(
    readonly pool: LockConnectionPool,
    readonly flavor: ServerFlavor,
    /** host:pid, written on every row for people reading the tables. */
    readonly holder: string,
  ) {}

  /** This process's lease row. */
  get processId(): string {
    if (this.id === undefined) throw new Error('LockLog.start() has not run');
    return this.id;
  }

  get clustered(): boolean {
    return this.flavor.cluster === 'galera';
  }

  /** Checks the schema and registers this process's lease row. */
  async start(): Promise<void> {
    await checkSchema(this.pool);
    const result = await this.pool.query<{ insertId: number | string }>(registerProcessStatement(this.holder), { purpose: 'admin' });
    this.id = String(result.insertId);
  }

  /** At shutdown: the process row goes if nothing live points to it any more (else the janitor reaps it later). */
  async stop(): Promise<void> {
    if (this.id === undefined || this.pool.isClosed) return;
    await this.pool.query(endProcessStatement(this.id), { purpose: 'admin' }).catch(() => undefined);
  }

  run<T>(plan: StatementPlan<T>, purpose: RoundTripPurpose, deadline?: number): Promise<T> {
    return runPlan(this.pool, plan, { purpose, deadline, oneByOne: this.clustered });
  }

  /**
   * One grant try, all keys or none. The common case is one round trip; missing key rows and
   * expired holders each cost one more, only when met. Deadlocks and lock-wait timeouts are tried
   * again at once (a free key must not look busy because InnoDB picked this try as a victim).
   * @throws LockStatementError for anything else; if its outcome is unknown the rows it may have
   *   committed were already given back.
   */
  async grant(
    input: Omit<GrantInput, 'processId' | 'holder' | 'statementLimit'>,
    deadline: number,
    options: { via?: DedicatedConnection; serverBoundMs?: number; before?: string } = {},
  ): Promise<GrantOutcome & { sentAt?: number; before?: unknown }> {
    const full: GrantInput = {
      ...input,
      holder: this.holder,
      processId: this.processId,
      statementLimit: options.serverBoundMs === undefined || options.serverBoundMs === Infinity ? undefined : { kind: this.flavor.kind, ms: options.serverBoundMs },
    };
    let plan = leanGrantPlan(full);
    let before: unknown;
    for (let attempt = 0; ; attempt++) {
      let outcome: GrantOutcome;
      const sentAt = performance.now();
      try {
        if (options.via && options.before !== undefined && attempt === 0) {
          // One round trip: the statement before (a doorbell wait) and then the grant.
          const first = await runOn(options.via, { statements: [options.before, ...plan.statements], parse: (r) => r }, deadline);
          before = first[0];
          outcome = plan.parse(first.slice(1));
        } else outcome = await this.sendGrant(plan, input.acquisitionId, deadline, options.via);
      } catch (error) {
        const failure = LockStatementError.from(error);
        if (failure.kind === 'retry' && attempt < 4) {
          await sleep(1 + Math.random() * 4 * (attempt + 1));
          continue;
        }
        if (failure.kind !== 'retry') await this.giveBack(input.acquisitionId, failure);
        throw failure;
      }
      // After a doorbell wait the lease starts later than the send time; the caller checks that one.
      if (outcome.granted) return before === undefined ? this.inTime(input, outcome, sentAt) : { ...outcome, sentAt, before };
      if (outcome.reason === 'missing-key-rows' && attempt < 4) {
        // First use of a key (or after the janitor reaped it): create its rows in their own
        // transaction, then grant, in one round trip.
        const create = createKeyRowsPlan(input.targets.map((t) => t.bytes), FENCING_FLOOR_KEY, this.flavor.sharedLockClause, ROW_LOCK_TABLE);
        const lean = leanGrantPlan(full);
        plan = { statements: [...create.statements, ...lean.statements], parse: (results) => lean.parse(results.slice(create.statements.length)) };
        continue;
      }
      if (outcome.reason === 'expired-holders' && attempt < 4) {
        plan = takeoverGrantPlan(full);
        continue;
      }
      return { ...outcome, before };
    }
  }

  /**
   * Ends the rows still live; returns how many it ended. Idempotent, so it is retried through
   * transient failures; if the database stays out of reach, the end is owed (see UnendedRows).
   */
  async endRows(rowIds: readonly string[], status: EndStatus | typeof LockStatus.EXPIRED, note?: string): Promise<number> {
    const plan = endRowsPlan(rowIds, status, note);
    try {
      return await this.withRetries('locks', () => this.run(plan, 'locks'));
    } catch (error) {
      this.unended.owe(`rows ${rowIds.join(',')}`, plan);
      throw error;
    }
  }

  extend(rowIds: readonly string[], leaseMs: number): Promise<{ storedKey: string; expiresAt: Date }[]> {
    return this.withRetries('locks', () => this.run(extendPlan(rowIds, leaseMs), 'locks'));
  }

  rowStatuses(rowIds: readonly string[]) {
    return this.run(rowStatusesPlan(rowIds), 'locks');
  }

  endedAmong(rowIds: readonly string[]): Promise<Set<string>> {
    return this.run(endedAmongPlan(rowIds), 'renewals');
  }

  /**
   * One renewal of this process's lease (the reserved connection: never queued behind grants).
   * Ends still owed are settled first; while they cannot be, no renewal is sent.
   */
  async renewProcess(deadline: number): Promise<{ endedCount: string; found: boolean }> {
    const options = { purpose: 'renewals' as const, deadline, lane: 'reserved' as const, oneByOne: this.clustered };
    if (this.unended.size > 0) await this.unended.settle((plan) => runPlan(this.pool, plan, options));
    return runPlan(this.pool, renewProcessPlan(this.processId, this.holder), options);
  }

  /** Creates missing key rows in their own transaction (first use of a key, or after the janitor reaped it). */
  async createKeyRows(keys: readonly Buffer[], deadline?: number): Promise<void> {
    await this.withRetries('locks', () =>
      this.run(createKeyRowsPlan(keys, FENCING_FLOOR_KEY, this.flavor.sharedLockClause, ROW_LOCK_TABLE), 'locks', deadline),
    );
  }

  /**
   * Gives back what a grant of unknown outcome may have committed: now, and once more after the
   * server has surely finished the statement (a COMMIT may land after the first give-back).
   */
  async giveBack(acquisitionId: string, failure: LockStatementError): Promise<void> {
    if (!failure.outcomeUnknown && failure.kind !== 'interrupted') return;
    const plan = abandonPlan(acquisitionId, this.processId);
    const once = () =>
      this.withRetries('locks', () => this.run(plan, 'locks')).catch(() => {
        this.unended.owe(`acquisition ${acquisitionId}`, plan);
        return 0;
      });
    await once();
    const timer = setTimeout(() => void once(), LATE_GIVE_BACK_MS);
    timer.unref();
  }

  /** Sends again after transient failures and broken connections, for a few seconds, with jitter. */
  async withRetries<T>(_purpose: RoundTripPurpose, send: () => Promise<T>): Promise<T> {
    const giveUpAt = performance.now() + RETRY_FOR_MS;
    for (let attempt = 1; ; attempt++) {
      try {
        return await send();
      } catch (error) {
        const failure = LockStatementError.from(error);
        const retriable = failure.kind === 'retry' || failure.kind === 'connection-lost' || failure.kind === 'unreachable' || failure.kind === 'interrupted';
        if (!retriable || performance.now() >= giveUpAt || this.pool.isClosed) throw failure;
        await sleep(2 + Math.random() * Math.min(20 * attempt, 200));
      }
    }
  }

  /**
   * One grant plan: on a doorbell's connection, as one batch (single server), or one statement per
   * round trip and read back after COMMIT on its own connection (multi-primary cluster).
   */
  private sendGrant(plan: StatementPlan<GrantOutcome>, acquisitionId: string, deadline: number, via: DedicatedConnection | undefined): Promise<GrantOutcome> {
    if (via) return runOn(via, plan, deadline);
    if (!this.clustered) return this.run(plan, 'locks', deadline);
    return runPlanThen(this.pool, plan, { purpose: 'locks', deadline }, (result, session) => confirmOnSession(session, acquisitionId, this.processId, result));
  }

  /**
   * A grant that answered after its lease's local deadline (its COMMIT held up, e.g. for the
   * seconds a multi-primary cluster freezes when a node dies) is given back at once instead of
   * handed to a caller: the database may already count that lease as over, so the holder's
   * signal would have to abort before its work even started.
   */
  private async inTime(input: { readonly leaseMs: number }, outcome: Extract<GrantOutcome, { granted: true }>, sentAt: number) {
    const localDeadline = sentAt + outcome.serverWaitMs + input.leaseMs - signalMarginMs(input.leaseMs);
    if (performance.now() < localDeadline) return { ...outcome, sentAt };
    const ids = outcome.rows.map((r) => r.id);
    await this.endRows(ids, LockStatus.RELEASED, 'given back: the grant answered after its lease had run out').catch(() => 0);
    return { granted: false as const, reason: 'busy' as const };
  }
}

/** A plan as one round trip on a connection kept out of the pool (a doorbell's). */
export async function runOn<T>(connection: DedicatedConnection, plan: StatementPlan<T>, deadline = Infinity): Promise<T> {
  const results = await connection.query<unknown>(plan.statements.join(';\n'), deadline);
  return plan.parse(plan.statements.length === 1 ? [results] : (results as unknown[]));
}
