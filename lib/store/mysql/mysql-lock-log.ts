import { sendWithRetries } from '../send-with-retries.js';
import { ANSWER_BOUND_MS, type LockConnectionPool, type RoundTripPurpose } from './lock-connection-pool.js';
import type { DedicatedConnection } from './dedicated-connection.js';
import { LockStatementError } from '../lock-statement.error.js';
import type { ServerFlavor } from './server-flavor.js';
import type { Bell as BellView, BellWait } from '../doorbell-store.js';
import type { GrantAnswer, GrantRequest, LockLogStore, ProcessLeaseStore } from '../lock-store.js';
import type { Bell, BellRequest } from './doorbells.js';
import { decideGrant, type GrantDecisionHost, grantedInTime, grantInputOf } from './grant-decision.js';
import { releaseThroughBell } from './bell-release.js';
import { type EndStatus, LockStatus, NOW, parseDate, ROW_LOCK_TABLE } from './sql.js';
import { runOn, runPlan, runPlanThen, type StatementPlan } from './statement-plan.js';
import { FastGrant } from './fast-grant.js';
import { KnownFreeKeys } from '../known-free-keys.js';
import { confirmOnSession } from './grant-confirmation.js';
import type { GrantInput, GrantOutcome } from './grant.sql.js';
import { createKeyRowsPlan } from './key-rows.sql.js';
import {
  giveBackPlan,
  endedAmongPlan,
  endProcessStatement,
  endRowsPlan,
  extendPlan,
  registerProcessStatement,
  renewProcessPlan,
  rowStatusesPlan,
} from './hold.sql.js';
import { FENCING_FLOOR_KEY } from '../../core/internal-keys.js';
import { checkSchema, type SchemaFeatures } from './schema-check.js';
import { UnendedRows } from '../unended-rows.js';
import { endedByThisRelease } from '../ended-by-earlier-try.js';
import { KEY_ROWS_ANSWER_MS } from '../answer-bound.js';

/** How long an (idempotent) release, extend or renewal is re-sent through deadlocks, lock-wait timeouts and broken connections: giving up would leave the key taken until its lease runs out. */
const RETRY_FOR_MS = 3_000;

export { ANSWER_BOUND_MS };

/** A grant of unknown outcome is given back again after this: the server has surely finished it by then (lock waits are bounded to 1 s). */
const LATE_GIVE_BACK_MS = 2_500;

/**
 * The lock log and the process lease on MySQL/MariaDB (see LockLogStore, ProcessLeaseStore), on
 * the library's own pool. On a multi-primary cluster every transaction goes one statement per
 * round trip and a grant counts only once its rows are read back after COMMIT.
 */
export class MysqlLockLog implements LockLogStore, ProcessLeaseStore, GrantDecisionHost {
  private id: string | undefined;
  /** What the schema offers beyond the tables: session routines, token claims; known after start(). */
  schema: SchemaFeatures = { routines: new Set(), claims: false };
  /** Rows a release or give-back could not end: ended before the next renewal (see UnendedRows). */
  private readonly unended = new UnendedRows<StatementPlan<number>>();
  readonly fast: FastGrant;

  constructor(
    readonly pool: LockConnectionPool,
    readonly flavor: ServerFlavor,
    /** host:pid, written on every row for people reading the tables. */
    readonly holder: string,
    knownFree = new KnownFreeKeys(),
  ) {
    this.fast = new FastGrant(pool, knownFree);
  }

  get processId(): string {
    if (this.id === undefined) throw new Error('MysqlLockLog.start() has not run');
    return this.id;
  }

  get clustered(): boolean {
    return this.flavor.cluster === 'galera';
  }

  /** Checks the schema (and which commit routines are there) and registers this process's process-lease row. */
  async start(): Promise<void> {
    this.schema = await checkSchema(this.pool);
    const sentAt = Date.now();
    const answer = await this.pool.query<unknown>(`${registerProcessStatement(this.holder)};\nSELECT ${NOW} AS now_at`, { purpose: 'admin' });
    const [registered, clock] = (Array.isArray(answer) ? answer : [answer, []]) as [{ insertId: number | string }, { now_at?: string }[]];
    if (clock[0]?.now_at) this.fast.observeServerClock(parseDate(clock[0].now_at), sentAt, Date.now());
    this.id = String(registered.insertId);
  }

  /** At shutdown: the process row goes if nothing live points to it any more (else the janitor reaps it later). */
  async stop(): Promise<void> {
    if (this.id === undefined || this.pool.isClosed) return;
    await this.pool.query(endProcessStatement(this.id), { purpose: 'admin' }).catch(() => undefined);
  }

  /** `plan` on the pool; `deadline` unset: the pool's ANSWER_BOUND_MS. */
  run<T>(plan: StatementPlan<T>, purpose: RoundTripPurpose, deadline?: number): Promise<T> {
    return runPlan(this.pool, plan, { purpose, deadline, oneByOne: this.clustered });
  }

  /**
   * A grant try. With no doorbell, on one server, a key not refused lately goes at the floor's shape
   * first (FastGrant), handled in the driver's callback; the full plan (decideGrant) only when that
   * did not grant.
   */
  grant(request: GrantRequest, deadline: number, options: { bell?: BellView | BellWait; serverBoundMs?: number } = {}): Promise<GrantAnswer> {
    const answer = this.grantBy(request, deadline, options);
    // A kept connection sent the first statement within that call (else it goes once one is open).
    request.onSent?.();
    return answer;
  }

  private grantBy(request: GrantRequest, deadline: number, options: { bell?: BellView | BellWait; serverBoundMs?: number }): Promise<GrantAnswer> {
    const full = grantInputOf(request, this, options.serverBoundMs === undefined ? undefined : { kind: this.flavor.kind, ms: options.serverBoundMs });
    const wait = options.bell?.kind === 'wait' ? (options.bell as BellRequest) : undefined;
    const via = wait?.connection ?? (options.bell as Bell | undefined)?.connection;
    if (via !== undefined || this.clustered || !this.fast.applies(full)) return decideGrant(this, full, deadline, { wait, via, tries: 0 });
    const sentAt = performance.now();
    // The time a connection took to open for the fast try counts in no bound (see connection-opening.ts).
    let openedMs = 0;
    return this.fast.tryGrant(
      full,
      deadline,
      {
        granted: (outcome) => {
          this.fast.knownFree.granted(full, outcome);
          return grantedInTime(this, full, outcome, sentAt + openedMs);
        },
        // Refused: the full plan decides again and says why.
        refused: () => decideGrant(this, full, deadline + openedMs, { tries: 1 }),
        failed: (failure) => decideGrant(this, full, deadline + openedMs, { tries: 1, failure }),
      },
      (ms) => (openedMs = ms),
    );
  }

  endRows(
    rowIds: readonly string[],
    status: EndStatus | typeof LockStatus.EXPIRED,
    note?: string,
    bell?: BellView,
    heldMs?: number,
  ): Promise<number> {
    const plan = endRowsPlan(rowIds, status, note, heldMs);
    const held = bell as Bell | undefined;
    if (held !== undefined) return this.endRowsBy(held, rowIds, plan, status, note);
    // The common release, answered in the driver's callback; a failure goes on to the retries.
    const ended = (count: number): number => this.fast.knownFree.ended(rowIds, count);
    const options = { purpose: 'locks' as const, oneByOne: this.clustered };
    return runPlan(this.pool, { statements: plan.statements, parse: (results) => ended(plan.parse(results)) }, options, (failure) =>
      this.endRetried(plan, rowIds, status, note, failure).then(ended, (error: unknown) => {
        this.unended.owe(`rows ${rowIds.join(',')}`, plan);
        throw error;
      }),
    );
  }

  /** The release of a lock with a doorbell: on the bell's connection, ringing it, when the bell is held. */
  private async endRowsBy(held: Bell, rowIds: readonly string[], plan: StatementPlan<number>, status: string, note?: string): Promise<number> {
    const rung = held.state === 'holding' ? await releaseThroughBell(held, plan, performance.now() + ANSWER_BOUND_MS) : undefined;
    if (rung !== undefined) return this.fast.knownFree.ended(rowIds, rung);
    if (held.state === 'waiting') await held.ring();
    try {
      return this.fast.knownFree.ended(rowIds, await this.endRetried(plan, rowIds, status, note));
    } catch (error) {
      this.unended.owe(`rows ${rowIds.join(',')}`, plan);
      throw error;
    }
  }

  /** The release sent again through transient failures (after `failure`, its first try's, if any). */
  private endRetried(plan: StatementPlan<number>, rowIds: readonly string[], status: string, note?: string, failure?: unknown): Promise<number> {
    return this.withRetries('locks', () => this.run(plan, 'locks'), failure).then((count) => endedByThisRelease(this, rowIds, status, note, count));
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

  /** On the reserved connection: never queued behind grants. While owed ends cannot be settled, no renewal is sent. */
  async renew(deadline: number): Promise<{ endedCount: string; created: boolean }> {
    const options = { purpose: 'renewals' as const, deadline, lane: 'reserved' as const, oneByOne: this.clustered };
    if (this.unended.size > 0) await this.unended.settle((plan) => runPlan(this.pool, plan, options));
    const sentAt = Date.now();
    const renewed = await runPlan(this.pool, renewProcessPlan(this.processId, this.holder), options);
    if (renewed.serverNow) this.fast.observeServerClock(renewed.serverNow, sentAt, Date.now());
    return renewed;
  }

  /** Creates missing key rows in their own transaction (first use of a key, or after the janitor reaped it). */
  async createKeyRows(keys: readonly Buffer[], deadline?: number): Promise<void> {
    const by = deadline === undefined ? undefined : Math.max(deadline, performance.now() + KEY_ROWS_ANSWER_MS);
    await this.withRetries('locks', () => this.run(this.keyRowsPlan(keys), 'locks', by));
  }

  /**
   * Gives back what a grant of unknown outcome may have committed: now, and once more after the
   * server has surely finished the statement (a COMMIT may land after the first give-back).
   */
  async giveBack(acquisitionId: string, failure: LockStatementError): Promise<void> {
    if (!failure.outcomeUnknown && failure.kind !== 'interrupted') return;
    const plan = giveBackPlan(acquisitionId, this.processId);
    const once = () =>
      this.withRetries('locks', () => this.run(plan, 'locks')).catch(() => {
        this.unended.owe(`acquisition ${acquisitionId}`, plan);
        return 0;
      });
    await once();
    const timer = setTimeout(() => void once(), LATE_GIVE_BACK_MS);
    timer.unref();
  }

  /** Sends again after transient failures and broken connections, for a few seconds (see sendWithRetries). */
  withRetries<T>(_purpose: RoundTripPurpose, send: () => Promise<T>, firstFailure?: unknown): Promise<T> {
    return sendWithRetries(send, RETRY_FOR_MS, () => this.pool.isClosed, firstFailure);
  }

  keyRowsPlan(keys: readonly Buffer[]): StatementPlan<void> {
    return createKeyRowsPlan(keys, FENCING_FLOOR_KEY, this.flavor.sharedLockClause, ROW_LOCK_TABLE);
  }

  /**
   * One grant plan: on a doorbell's connection, as one batch (single server), or one statement per
   * round trip and read back after COMMIT on its own connection (multi-primary cluster).
   */
  sendGrant(
    plan: StatementPlan<GrantOutcome>,
    input: Pick<GrantInput, 'acquisitionId' | 'connectBy'>,
    deadline: number,
    via?: DedicatedConnection,
    onOpened?: (ms: number) => void,
  ): Promise<GrantOutcome> {
    if (via) return runOn(via, plan, deadline);
    const options = { purpose: 'locks' as const, deadline, connectBy: input.connectBy, onOpened };
    if (!this.clustered) return runPlan(this.pool, plan, { ...options, oneByOne: false });
    return runPlanThen(this.pool, plan, options, (result, session) => confirmOnSession(session, input.acquisitionId, this.processId, result));
  }
}
