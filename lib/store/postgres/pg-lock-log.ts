import type { EndStatus, LockStatus } from '../../core/lock-status.js';
import { DbLockSchemaError } from '../../errors/db-lock-schema.error.js';
import type { Bell, BellWait } from '../doorbell-store.js';
import { grantAfterBell, releaseThroughBell } from './pg-bell-grant.js';
import type { PgBell, PgBellRequest } from './pg-doorbells.js';
import { endedByThisRelease } from '../ended-by-earlier-try.js';
import { LockStatementError } from '../lock-statement.error.js';
import type { GrantAnswer, GrantRequest, LockLogStore, ProcessLeaseStore, RowLockAuditRow } from '../lock-store.js';
import { sendWithRetries } from '../send-with-retries.js';
import { UnendedRows } from '../unended-rows.js';
import { KnownFreeKeys } from '../known-free-keys.js';
import { grantLease, grantOnPool, type LeaseGrantHost } from './pg-lease-grant.js';
import {
  createKeyRowsStatement,
  endedAmongStatement,
  endRowsStatement,
  extendStatement,
  giveBackStatement,
  insertAuditRows,
  rowStatusesStatement,
} from './pg-log-rows.sql.js';
import type { PgLockPool } from './pg-pool.js';
import { LOCK_NOT_AVAILABLE, sqlStateOf } from './pg-failures.js';
import { bounded } from './pg-row-lock.sql.js';
import { KEY_ROWS_ANSWER_MS } from '../answer-bound.js';
import {
  keyText,
  LIVE_STATUSES_SQL,
  LOCK_LOG_TABLE,
  LOCK_TABLE,
  NOW,
  parseDate,
  PROCESS_TABLE,
  ROW_LOCK_TABLE,
  rowIdLiteral,
  textLiteral,
  type Row,
} from './pg-sql.js';

/** How long an idempotent write (key rows, audit rows, renewals) is re-sent through transient failures. */
const RETRY_FOR_MS = 3_000;

/** A grant of unknown outcome is given back again after this: the server has surely finished its batch by then (each lock wait is bounded, see LOCK_WAIT_MS). */
const LATE_GIVE_BACK_MS = 5_000;

/**
 * The lock log and the process lease on PostgreSQL, on the library's own pool: the lease's grants
 * (pg-lease-grant.ts), releases and extensions, key rows, audit rows of row-lock holds that did not
 * commit, and the process lease that keeps every lease lock of the process alive.
 */
export class PgLockLog implements LockLogStore, ProcessLeaseStore, LeaseGrantHost {
  private id: string | undefined;
  /** Ends a release or give-back could not send: settled before the next renewal (see UnendedRows). */
  private readonly unended = new UnendedRows<string>();

  constructor(
    readonly pool: PgLockPool,
    /** host:pid, written on every row for people reading the tables. */
    readonly holder: string,
    readonly knownFree = new KnownFreeKeys(),
  ) {}

  get processId(): string {
    if (this.id === undefined) throw new Error('PgLockLog.start() has not run');
    return this.id;
  }

  /** Checks the tables and registers this process's process-lease row. */
  async start(): Promise<void> {
    try {
      await this.pool.query(
        `SELECT lock_key, fencing_token, writer_waiting_until, last_granted_at, semaphore_limit, no_lease_holders FROM ${LOCK_TABLE} LIMIT 0;\n` +
          `SELECT id, lock_key, mode, owner, holder, fencing_token, status, lease_ms, acquired_at, expires_at, ended_at, wait_ms, hold_ms, note, process_id, strategy, fenced_count FROM ${LOCK_LOG_TABLE} LIMIT 0;\n` +
          `SELECT id, holder, started_at, renewed_at, ended_count FROM ${PROCESS_TABLE} LIMIT 0;\n` +
          `SELECT lock_key FROM ${ROW_LOCK_TABLE} LIMIT 0`,
        'admin',
      );
    } catch (error) {
      const failure = LockStatementError.from(error);
      if (failure.kind !== 'schema') throw failure;
      throw new DbLockSchemaError(
        `The lock tables are missing or out of date (${(failure.driverError as Error).message}). Run the library's migrations ` +
          `(DB_LOCK_MIGRATIONS from 'nestjs-db-lock') before starting the app.`,
        { cause: failure.driverError },
      );
    }
    const [registered] = await this.pool.query(
      `INSERT INTO ${PROCESS_TABLE} (holder, started_at, renewed_at) VALUES (${textLiteral(this.holder)}, ${NOW}, ${NOW}) RETURNING id`,
      'admin',
    );
    this.id = String(registered!.rows[0]!.id);
  }

  /** At shutdown: the process row goes if nothing live points to it any more (else the janitor reaps it later). */
  async stop(): Promise<void> {
    if (this.id === undefined || this.pool.isClosed) return;
    const id = rowIdLiteral(this.id);
    await this.pool
      .query(
        `DELETE FROM ${PROCESS_TABLE} WHERE id = ${id} AND NOT EXISTS (SELECT 1 FROM ${LOCK_LOG_TABLE} WHERE status IN ${LIVE_STATUSES_SQL} AND process_id = ${id})`,
        'admin',
      )
      .catch(() => undefined);
  }

  /**
   * A grant try: after a wait for the key's doorbell, on the bell's session (grantAfterBell);
   * through a bell this process has, on its session; else on the pool, behind any doorbell
   * waiter of the key (the turn check), in one statement when this process knows the key free.
   * Every grant tells `knownFree`, which forgets the keys it moved.
   */
  async grant(request: GrantRequest, deadline: number, options: { bell?: Bell | BellWait; serverBoundMs?: number } = {}): Promise<GrantAnswer> {
    const answer = await this.grantBy(request, deadline, options);
    this.knownFree.granted(request, answer);
    return answer;
  }

  private grantBy(request: GrantRequest, deadline: number, options: { bell?: Bell | BellWait; serverBoundMs?: number }): Promise<GrantAnswer> {
    const serverBoundMs = options.serverBoundMs ?? Infinity;
    if (options.bell?.kind === 'wait') return grantAfterBell(this, request, options.bell as PgBellRequest, deadline, serverBoundMs);
    if (options.bell !== undefined) {
      return grantLease(this, request, deadline, serverBoundMs, { channel: (options.bell as PgBell).connection });
    }
    return grantOnPool(this, request, deadline, serverBoundMs);
  }

  /** Sent again through transient failures; if the database stays out of reach, the end is owed (settled before the next renewal). */
  async endRows(
    rowIds: readonly string[],
    status: EndStatus | typeof LockStatus.EXPIRED,
    note?: string,
    bell?: Bell,
    heldMs?: number,
  ): Promise<number> {
    // The holder of the key's bell releases on the bell's session and rings it, one round trip.
    const held = bell as PgBell | undefined;
    // A bell release that failed may still land (its answer was lost): the pool's then counts as a retry.
    let tries = 0;
    if (held?.state === 'holding') {
      const ended = await releaseThroughBell(held, rowIds, status, note, heldMs);
      if (ended !== undefined) return this.knownFree.ended(rowIds, ended);
      tries++;
    } else if (held?.state === 'waiting') await held.ring();
    const sql = endRowsStatement(rowIds, status, note, heldMs);
    let count: number;
    try {
      count = await this.withRetries(() => (tries++, this.pool.query(sql, 'locks'))).then((results) => results[0]!.rowCount ?? 0);
    } catch (error) {
      this.unended.owe(`rows ${rowIds.join(',')}`, sql);
      throw error;
    }
    // Sent again after a try of unknown outcome: that try may have ended the rows itself.
    return this.knownFree.ended(rowIds, tries > 1 ? await endedByThisRelease(this, rowIds, status, note, count) : count);
  }

  async extend(rowIds: readonly string[], leaseMs: number): Promise<{ storedKey: string; expiresAt: Date }[]> {
    const [extended] = await this.withRetries(() => this.pool.query(extendStatement(rowIds, leaseMs), 'locks'));
    return extended!.rows.map((row: Row) => ({ storedKey: keyText(row.lock_key), expiresAt: parseDate(row.expires_at) }));
  }

  /**
   * Gives back what a grant of unknown outcome may have committed: now, and once more after the
   * server has surely finished the batch (its lock waits are bounded), since its COMMIT may land
   * after the first give-back. One that cannot be sent is owed.
   */
  async giveBack(acquisitionId: string): Promise<void> {
    const sql = giveBackStatement(acquisitionId, this.processId);
    const once = () =>
      this.withRetries(() => this.pool.query(sql, 'locks')).then(
        () => undefined,
        () => this.unended.owe(`acquisition ${acquisitionId}`, sql),
      );
    await once();
    setTimeout(() => void once(), LATE_GIVE_BACK_MS).unref();
  }

  async rowStatuses(rowIds: readonly string[]): Promise<{ id: string; storedKey: string; status: string; note: string | null }[]> {
    if (rowIds.length === 0) return [];
    const [result] = await this.pool.query(rowStatusesStatement(rowIds), 'locks');
    return result!.rows.map((row: Row) => ({
      id: String(row.id),
      storedKey: keyText(row.lock_key),
      status: String(row.status),
      note: row.note === null ? null : String(row.note),
    }));
  }

  async endedAmong(rowIds: readonly string[]): Promise<Set<string>> {
    if (rowIds.length === 0) return new Set();
    const [result] = await this.pool.query(endedAmongStatement(rowIds), 'renewals');
    return new Set(result!.rows.map((row: Row) => String(row.id)));
  }

  /**
   * The process lease's renewal (its row created again if the janitor reaped it meanwhile); ends
   * still owed go first, and until they are settled no renewal is sent. Sent once, as on MySQL: the
   * watchdog retries a failed renewal soon and reports each failure (`renewal-failed`, the
   * warning, the counters). Re-sent here, a renewal killed or kept waiting went unreported for
   * seconds while the retries ran.
   */
  async renew(deadline: number): Promise<{ endedCount: string; created: boolean }> {
    if (this.unended.size > 0) await this.unended.settle((sql) => this.pool.query(sql, 'renewals', deadline - performance.now()));
    const id = rowIdLiteral(this.processId);
    const [result] = await this.pool.query(
      `INSERT INTO ${PROCESS_TABLE} (id, holder, started_at, renewed_at) VALUES (${id}, ${textLiteral(this.holder)}, ${NOW}, ${NOW}) ` +
        `ON CONFLICT (id) DO UPDATE SET renewed_at = ${NOW} RETURNING ended_count, (xmax = 0) AS created`,
      'renewals',
      deadline - performance.now(),
    );
    const row = result!.rows[0] as { ended_count: string; created: boolean };
    return { endedCount: String(row.ended_count), created: row.created === true };
  }

  /**
   * Creates missing key rows in one committed statement (first use of a key, or after the janitor
   * reaped it), from the fencing floor, read with a shared lock: a reap takes it exclusively, so a
   * key's tokens never go back. An existing row is left alone without waiting for its holder. A row
   * another transaction inserted and has not committed is waited for until `deadline` only (the
   * server ends the wait, 55P03), then left to it: a row-lock holder that created the key in its
   * joined transaction keeps that row until its hold ends, so the key is busy, and the take that
   * follows finds the row missing and answers so.
   */
  async createKeyRows(keys: readonly Buffer[], deadline?: number): Promise<void> {
    const statement = createKeyRowsStatement(keys);
    // Each send waits only what is left until the deadline (a retry after a broken connection too).
    await this.withRetries(() => {
      const waitMs = deadline === undefined ? Infinity : Math.max(1, deadline - performance.now());
      const answerMs = waitMs === Infinity ? undefined : waitMs + KEY_ROWS_ANSWER_MS;
      return this.pool.query(bounded([statement], waitMs).sql, 'locks', answerMs).catch((error: unknown) => {
        if (sqlStateOf((error as Error).cause) !== LOCK_NOT_AVAILABLE) throw error;
      });
    });
  }

  /** Terminal audit rows (holds that did not commit, or ended at shutdown), in one statement. */
  async recordEnded(rows: readonly RowLockAuditRow[]): Promise<void> {
    if (rows.length === 0) return;
    await this.withRetries(() => this.pool.query(insertAuditRows(rows, this.holder), 'locks'));
  }

  /** Sends again after transient failures and broken connections, for a few seconds (see sendWithRetries). */
  withRetries<T>(send: () => Promise<T>): Promise<T> {
    return sendWithRetries(send, RETRY_FOR_MS, () => this.pool.isClosed);
  }
}
