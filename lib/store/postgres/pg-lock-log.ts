import { FENCING_FLOOR_KEY } from '../../core/internal-keys.js';
import { DbLockError } from '../../errors/db-lock.error.js';
import { DbLockSchemaError } from '../../errors/db-lock-schema.error.js';
import { LockStatementError } from '../lock-statement.error.js';
import type { GrantAnswer, LockLogStore, ProcessLeaseStore, RowLockAuditRow } from '../lock-store.js';
import { sendWithRetries } from '../send-with-retries.js';
import type { PgLockPool } from './pg-pool.js';
import {
  keyLiteral,
  keyText,
  LIVE_STATUSES_SQL,
  LOCK_LOG_TABLE,
  LOCK_TABLE,
  NOW,
  nullableText,
  PROCESS_TABLE,
  ROW_LOCK_TABLE,
  rowIdLiteral,
  sqlInteger,
  textLiteral,
} from './pg-sql.js';

/** How long an idempotent write (key rows, audit rows, renewals) is re-sent through transient failures. */
const RETRY_FOR_MS = 3_000;

/** The lease strategy's calls (grants, releases, the fence), which this store does not serve yet: the module refuses the strategy at start. */
export const leaseUnavailable = (): DbLockError =>
  new DbLockError("The lease strategy is not available on PostgreSQL in this version: use strategy 'row-lock'.");

/**
 * The lock log and the process lease on PostgreSQL, on the library's own pool. This version serves
 * the row-lock strategy: key rows, audit rows of holds that did not commit, the process lease; the
 * lease strategy's grants and releases are refused (see PostgresStore.strategies).
 */
export class PgLockLog implements LockLogStore, ProcessLeaseStore {
  private id: string | undefined;

  constructor(
    readonly pool: PgLockPool,
    /** host:pid, written on every row for people reading the tables. */
    readonly holder: string,
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

  grant(): Promise<GrantAnswer> {
    return Promise.reject(leaseUnavailable());
  }

  endRows(): Promise<number> {
    return Promise.reject(leaseUnavailable());
  }

  extend(): Promise<{ storedKey: string; expiresAt: Date }[]> {
    return Promise.reject(leaseUnavailable());
  }

  async rowStatuses(rowIds: readonly string[]): Promise<{ id: string; storedKey: string; status: string; note: string | null }[]> {
    if (rowIds.length === 0) return [];
    const [result] = await this.pool.query(
      `SELECT id, lock_key, status, note FROM ${LOCK_LOG_TABLE} WHERE id IN (${rowIds.map(rowIdLiteral).join(', ')})`,
      'locks',
    );
    return result!.rows.map((row: Record<string, unknown>) => ({
      id: String(row.id),
      storedKey: keyText(row.lock_key),
      status: String(row.status),
      note: row.note === null ? null : String(row.note),
    }));
  }

  async endedAmong(rowIds: readonly string[]): Promise<Set<string>> {
    if (rowIds.length === 0) return new Set();
    const [result] = await this.pool.query(
      `SELECT id FROM ${LOCK_LOG_TABLE} WHERE id IN (${rowIds.map(rowIdLiteral).join(', ')}) AND status NOT IN ${LIVE_STATUSES_SQL}`,
      'renewals',
    );
    return new Set(result!.rows.map((row: Record<string, unknown>) => String(row.id)));
  }

  /** The process lease's renewal (its row created again if the janitor reaped it meanwhile). */
  async renew(deadline: number): Promise<{ endedCount: string; created: boolean }> {
    const id = rowIdLiteral(this.processId);
    const [result] = await this.withRetries(() =>
      this.pool.query(
        `INSERT INTO ${PROCESS_TABLE} (id, holder, started_at, renewed_at) VALUES (${id}, ${textLiteral(this.holder)}, ${NOW}, ${NOW}) ` +
          `ON CONFLICT (id) DO UPDATE SET renewed_at = ${NOW} RETURNING ended_count, (xmax = 0) AS created`,
        'renewals',
        deadline - performance.now(),
      ),
    );
    const row = result!.rows[0] as { ended_count: string; created: boolean };
    return { endedCount: String(row.ended_count), created: row.created === true };
  }

  /**
   * Creates missing key rows in one committed statement (first use of a key, or after the janitor
   * reaped it), from the fencing floor, read with a shared lock: a reap takes it exclusively, so a
   * key's tokens never go back. An existing row is left alone without waiting for its holder.
   */
  async createKeyRows(keys: readonly Buffer[], deadline?: number): Promise<void> {
    await this.withRetries(() =>
      this.pool.query(createKeyRowsStatement(keys), 'locks', deadline === undefined ? undefined : deadline - performance.now()),
    );
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

/**
 * The key rows' creation (see PgLockLog.createKeyRows); also run inside a joined transaction. This
 * store grants no lease, so no lease holder of a key can be live: its row says so from the start
 * (`no_lease_holders = 1`), and every take, a reader's too, is the one-statement path.
 */
export function createKeyRowsStatement(keys: readonly Buffer[]): string {
  return (
    `WITH floor AS (SELECT fencing_token FROM ${LOCK_TABLE} WHERE lock_key = ${keyLiteral(FENCING_FLOOR_KEY)} FOR SHARE) ` +
    `INSERT INTO ${LOCK_TABLE} (lock_key, fencing_token, no_lease_holders) SELECT k, COALESCE((SELECT max(fencing_token) FROM floor), 0), 1 ` +
    `FROM (VALUES ${keys.map((key) => `(${keyLiteral(key)})`).join(', ')}) AS wanted(k) ON CONFLICT (lock_key) DO NOTHING`
  );
}

/**
 * Row-lock audit rows, terminal as written: in the commit that ends the hold (RELEASED, with the
 * work), or after a rollback (FAILED, EXPIRED) on the library's pool. ended_at is the server's clock.
 */
export function insertAuditRows(rows: readonly RowLockAuditRow[], holder: string): string {
  const values = rows.map(
    (r) =>
      `(${keyLiteral(r.key)}, ${textLiteral(r.mode)}, ${textLiteral(r.owner)}, ${textLiteral(holder)}, 'row-lock', ${sqlInteger(r.fencingToken)}, ` +
      `${textLiteral(r.status)}, 0, ${NOW} - ${sqlInteger(r.holdMs * 1000)} * interval '1 microsecond', ${NOW}, ${NOW}, ${sqlInteger(r.waitedMs)}, ` +
      `${sqlInteger(r.holdMs)}, ${nullableText(r.note)})`,
  );
  return (
    `INSERT INTO ${LOCK_LOG_TABLE} (lock_key, mode, owner, holder, strategy, fencing_token, status, lease_ms, acquired_at, expires_at, ended_at, wait_ms, hold_ms, note) ` +
    `VALUES ${values.join(', ')}`
  );
}
