import { FENCING_FLOOR_KEY } from '../../core/internal-keys.js';
import { LockStatementError } from '../lock-statement.error.js';
import type { JanitorStore } from '../lock-store.js';
import { LOCK_NOT_AVAILABLE, sqlStateOf } from './pg-failures.js';
import type { PgLockLog } from './pg-lock-log.js';
import {
  EFFECTIVE_EXPIRY,
  endHoldersCtes,
  FIRST_INTERNAL_KEY,
  keyList,
  keyLiteral,
  keyText,
  LIVE_STATUSES_SQL,
  LOCK_LOG_TABLE,
  LOCK_TABLE,
  LockStatus,
  msInterval,
  NOW,
  PROCESS_TABLE,
  rowIdLiteral,
  sqlInteger,
} from './pg-sql.js';

/** Note written on log rows the janitor expires. */
const JANITOR_RECLAIM_NOTE = 'reclaimed by janitor';

/** Above every log row id (bigint): the prune's bound when no row was granted within the retention. */
const MAX_ROW_ID = '9223372036854775807';

/**
 * The janitor's batches on PostgreSQL (the same work as on MySQL, see janitor.sql.ts there), each
 * touching at most `batchSize` rows, in primary-key order, comparing times on the server clock,
 * never waiting on a holder (SKIP LOCKED, NOWAIT), and retried through transient failures.
 */
export class PgJanitorStore implements JanitorStore {
  /** Where the last prune's boundary was found: rows below it were all granted before it. */
  private pruneFrom = '0';

  constructor(private readonly log: PgLockLog) {}

  /**
   * In one statement: the candidates (live rows whose lease ran out, oldest first from above
   * `afterId`), then those ended by id with the expiry checked again under their row locks (a
   * renewal in between wins), skipping rows someone keeps locked right now (a holder between its
   * fence and its COMMIT): they are not waited for. One answer row per ended key, or one with no key.
   */
  async reclaimExpired(batchSize: number, afterId = '0') {
    const expired = `g.status IN ${LIVE_STATUSES_SQL} AND ${EFFECTIVE_EXPIRY} <= ${NOW}`;
    const [answer] = await this.send(
      `WITH candidates AS (SELECT g.id FROM ${LOCK_LOG_TABLE} g LEFT JOIN ${PROCESS_TABLE} p ON p.id = g.process_id ` +
        `WHERE g.id > ${rowIdLiteral(afterId)} AND ${expired} ORDER BY g.id LIMIT ${sqlInteger(batchSize)}), ` +
        `due AS (SELECT g.id FROM ${LOCK_LOG_TABLE} g LEFT JOIN ${PROCESS_TABLE} p ON p.id = g.process_id ` +
        `WHERE g.id IN (SELECT id FROM candidates) AND ${expired} FOR UPDATE OF g SKIP LOCKED), ` +
        `${endHoldersCtes(LockStatus.EXPIRED, JANITOR_RECLAIM_NOTE)} ` +
        `SELECT c.n, c.last_id, e.lock_key FROM (SELECT count(*)::int AS n, max(id)::text AS last_id FROM candidates) c LEFT JOIN ended e ON true`,
    );
    const rows = answer!.rows as { n: number; last_id: string | null; lock_key: Buffer | null }[];
    const candidates = rows[0]?.n ?? 0;
    if (candidates === 0) return { candidates: 0, count: 0, keys: [] };
    const keys = rows.filter((row) => row.lock_key !== null).map((row) => keyText(row.lock_key));
    return { candidates, count: keys.length, keys: [...new Set(keys)], lastId: rows[0]!.last_id ?? undefined, skipped: candidates - keys.length };
  }

  /**
   * Deletes up to `batchSize` terminal log rows that ended more than `retentionMs` ago, in id order
   * below the first row granted within the retention: ids follow grant time, so the delete's scan
   * of the primary key ends where recent rows begin (an index on the grant time would cost every
   * grant and every audit row at insert). Without that bound, a run with fewer rows to delete than
   * its batch read the whole log (500,000 recent rows: 628 ms a run). The boundary is searched
   * from the last one found, so over all runs each row is passed once; a row granted out of id
   * order waits for a later run. One statement: the cut-off and the boundary are read once, the
   * boundary answered so that the next run searches from it.
   */
  async prune(retentionMs: number, batchSize: number): Promise<number> {
    const old = '(SELECT at FROM cutoff)';
    const [answer] = await this.send(
      `WITH cutoff AS (SELECT ${NOW} - ${msInterval(sqlInteger(retentionMs))} AS at), ` +
        `boundary AS (SELECT id FROM ${LOCK_LOG_TABLE} WHERE id >= ${rowIdLiteral(this.pruneFrom)} AND acquired_at >= ${old} ORDER BY id LIMIT 1), ` +
        `pruned AS (DELETE FROM ${LOCK_LOG_TABLE} WHERE id IN (SELECT id FROM ${LOCK_LOG_TABLE} WHERE id < COALESCE((SELECT id FROM boundary), ${MAX_ROW_ID}) ` +
        `AND acquired_at < ${old} AND ended_at < ${old} AND status NOT IN ${LIVE_STATUSES_SQL} ORDER BY id LIMIT ${sqlInteger(batchSize)}) RETURNING 1) ` +
        `SELECT (SELECT id FROM boundary) AS boundary, (SELECT count(*) FROM pruned)::int AS pruned`,
    );
    const row = answer!.rows[0] as { boundary: string | null; pruned: number };
    if (row.boundary !== null) this.pruneFrom = String(row.boundary);
    return row.pruned;
  }

  /**
   * Idle key rows (no live log row, no recent grant, no waiting writer), in one transaction: the
   * fencing floor taken exclusively (key rows are created reading it with a shared lock, so no key
   * comes back below a reaped token) NOWAIT, the idle rows locked SKIP LOCKED (a row locked now is
   * in use), the floor raised to their highest token, and they are deleted.
   */
  async reapIdleKeys(idleMs: number, batchSize: number): Promise<{ candidates: number; reaped: number; floorBusy?: boolean }> {
    const idle =
      `l.lock_key < ${FIRST_INTERNAL_KEY} AND (l.last_granted_at IS NULL OR l.last_granted_at < ${NOW} - ${msInterval(sqlInteger(idleMs))}) ` +
      `AND (l.writer_waiting_until IS NULL OR l.writer_waiting_until < ${NOW}) ` +
      `AND NOT EXISTS (SELECT 1 FROM ${LOCK_LOG_TABLE} g WHERE g.lock_key = l.lock_key AND g.status IN ${LIVE_STATUSES_SQL})`;
    const [found] = await this.send(`SELECT l.lock_key FROM ${LOCK_TABLE} l WHERE ${idle} ORDER BY l.lock_key LIMIT ${sqlInteger(batchSize)}`);
    const candidates = found!.rows.map((row: Record<string, unknown>) => row.lock_key as Buffer);
    if (candidates.length === 0) return { candidates: 0, reaped: 0 };
    const floor = keyLiteral(FENCING_FLOOR_KEY);
    const reap =
      `BEGIN;\n` +
      `INSERT INTO ${LOCK_TABLE} (lock_key, fencing_token) VALUES (${floor}, 0) ON CONFLICT (lock_key) DO NOTHING;\n` +
      `SELECT fencing_token FROM ${LOCK_TABLE} WHERE lock_key = ${floor} FOR UPDATE NOWAIT;\n` +
      `WITH idle AS (SELECT l.lock_key, l.fencing_token FROM ${LOCK_TABLE} l WHERE l.lock_key IN (${keyList(candidates)}) AND ${idle} ` +
      `ORDER BY l.lock_key FOR UPDATE SKIP LOCKED), ` +
      `raised AS (UPDATE ${LOCK_TABLE} SET fencing_token = GREATEST(fencing_token, (SELECT COALESCE(max(fencing_token), 0) FROM idle)) WHERE lock_key = ${floor}), ` +
      `gone AS (DELETE FROM ${LOCK_TABLE} d USING idle WHERE d.lock_key = idle.lock_key RETURNING d.lock_key) ` +
      `SELECT count(*)::int AS reaped FROM gone;\n` +
      `COMMIT`;
    const reaped = await this.log.withRetries(() =>
      this.log.pool.query(reap, 'janitor').then(
        (results) => Number((results[3]!.rows[0] as { reaped: number }).reaped),
        (error: unknown) => {
          // The floor is in use (a key row being created right now): reaped on a later run, not waited for.
          if (sqlStateOf(LockStatementError.from(error).driverError) === LOCK_NOT_AVAILABLE) return undefined;
          throw error;
        },
      ),
    );
    if (reaped === undefined) return { candidates: candidates.length, reaped: 0, floorBusy: true };
    return { candidates: candidates.length, reaped };
  }

  /** Process lease rows of processes gone for longer than `idleMs` with nothing live pointing to them. */
  async reapProcesses(idleMs: number, batchSize: number): Promise<void> {
    await this.send(
      `DELETE FROM ${PROCESS_TABLE} WHERE id IN (SELECT p.id FROM ${PROCESS_TABLE} p WHERE p.renewed_at < ${NOW} - ${msInterval(sqlInteger(idleMs))} ` +
        `AND NOT EXISTS (SELECT 1 FROM ${LOCK_LOG_TABLE} g WHERE g.status IN ${LIVE_STATUSES_SQL} AND g.process_id = p.id) ORDER BY p.id LIMIT ${sqlInteger(batchSize)})`,
    );
  }

  private send(sql: string) {
    return this.log.withRetries(() => this.log.pool.query(sql, 'janitor'));
  }
}
