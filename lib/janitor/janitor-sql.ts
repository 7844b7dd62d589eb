import mysql from 'mysql2';
import { FENCING_FLOOR_KEY, INTERNAL_KEY_BYTE } from '../storage/internal-keys.js';
import { LIVE_STATUSES_SQL, LOCK_LOG_TABLE, LOCK_TABLE, LockStatus } from '../storage/lock-tables.js';

/**
 * The janitor's statements. Each one touches at most `batchSize` rows (UPDATE/DELETE ... LIMIT),
 * so it never holds many row locks, and compares times on the server clock only.
 */
const format = (sql: string, values: unknown[]): string => mysql.format(sql, values as Parameters<typeof mysql.format>[1]);
const NOW = 'UTC_TIMESTAMP(6)';

/** Note written on log rows the janitor expires. */
export const JANITOR_RECLAIM_NOTE = 'reclaimed by janitor';

/** Index of the statement listing the reclaimed rows per key. */
export const RECLAIM_ROWS_INDEX = 2;

/**
 * Expires up to `batchSize` live log rows whose lease ran out (status EXPIRED: that fences their
 * stale holders, whose renewal then reports the loss), and lists them per key. All rows of one
 * batch share one `ended_at`, which is how the listing finds them again (indexed).
 */
export function reclaimBatchStatement(batchSize: number): string {
  return [
    `SET @dbl_janitor_at = ${NOW}`,
    format(
      `UPDATE ${LOCK_LOG_TABLE} SET status = '${LockStatus.EXPIRED}', ended_at = @dbl_janitor_at, ` +
        `hold_ms = TIMESTAMPDIFF(MICROSECOND, acquired_at, @dbl_janitor_at) DIV 1000, note = ? ` +
        `WHERE status IN ${LIVE_STATUSES_SQL} AND expires_at <= @dbl_janitor_at LIMIT ?`,
      [JANITOR_RECLAIM_NOTE, batchSize],
    ),
    format(
      `SELECT lock_key, COUNT(*) AS n FROM ${LOCK_LOG_TABLE} WHERE ended_at = @dbl_janitor_at AND status = '${LockStatus.EXPIRED}' AND note = ? GROUP BY lock_key`,
      [JANITOR_RECLAIM_NOTE],
    ),
  ].join(';\n');
}

/** Deletes up to `batchSize` terminal log rows that ended more than `retentionMs` ago. */
export function pruneBatchStatement(retentionMs: number, batchSize: number): string {
  return format(
    `DELETE FROM ${LOCK_LOG_TABLE} WHERE ended_at < ${NOW} - INTERVAL ? MICROSECOND AND status NOT IN ${LIVE_STATUSES_SQL} LIMIT ?`,
    [retentionMs * 1000, batchSize],
  );
}

/** A key row is idle: no live log row, no recent grant, no waiting writer, not an internal row. */
function idleCondition(idleMs: number): { sql: string; values: unknown[] } {
  return {
    sql:
      `l.lock_key < ? AND (l.last_granted_at IS NULL OR l.last_granted_at < ${NOW} - INTERVAL ? MICROSECOND) ` +
      `AND (l.writer_waiting_until IS NULL OR l.writer_waiting_until < ${NOW}) ` +
      `AND NOT EXISTS (SELECT 1 FROM ${LOCK_LOG_TABLE} g WHERE g.lock_key = l.lock_key AND g.status IN ${LIVE_STATUSES_SQL})`,
    values: [Buffer.from([INTERNAL_KEY_BYTE]), idleMs * 1000],
  };
}

/** Candidate idle key rows (a plain read, no locks). */
export function idleKeysStatement(idleMs: number, batchSize: number): string {
  const idle = idleCondition(idleMs);
  return format(`SELECT l.lock_key FROM ${LOCK_TABLE} l WHERE ${idle.sql} LIMIT ?`, [...idle.values, batchSize]);
}

/** Index of the statement reporting how many key rows were reaped. */
export const REAP_SUMMARY_INDEX = 5;

/**
 * Deletes the candidate key rows that are still idle, in one transaction that first takes the
 * fencing floor row exclusively (grants read it with a shared lock before creating a key row, so
 * no grant can create a reaped key from an old floor), raises the floor to the highest token
 * deleted, and deletes only rows whose token the floor covers.
 */
export function reapStatement(keys: readonly Buffer[], idleMs: number): string {
  const idle = idleCondition(idleMs);
  return [
    'START TRANSACTION',
    format(`INSERT INTO ${LOCK_TABLE} (lock_key, fencing_token) VALUES (?, 0) ON DUPLICATE KEY UPDATE lock_key = lock_key`, [FENCING_FLOOR_KEY]),
    format(`SELECT COALESCE(MAX(l.fencing_token), 0) INTO @dbl_reap_max FROM ${LOCK_TABLE} l WHERE l.lock_key IN (?) AND ${idle.sql} FOR UPDATE`, [
      keys,
      ...idle.values,
    ]),
    format(`UPDATE ${LOCK_TABLE} SET fencing_token = GREATEST(fencing_token, @dbl_reap_max) WHERE lock_key = ?`, [FENCING_FLOOR_KEY]),
    format(`DELETE l FROM ${LOCK_TABLE} l WHERE l.lock_key IN (?) AND l.fencing_token <= @dbl_reap_max AND ${idle.sql}`, [keys, ...idle.values]),
    'SELECT ROW_COUNT() AS reaped',
    'COMMIT',
  ].join(';\n');
}
