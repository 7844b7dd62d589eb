import type { GrantedRow } from '../../core/held-lock.js';
import type { LockTarget } from '../../core/lock-key.js';
import type { GrantInput } from './grant.sql.js';
import { LEASE_GRANTED, format, keyText, LIVE_STATUSES_SQL, LOCK_LOG_TABLE, LOCK_TABLE, LockStatus, nextTokenSql, NOW, parseDate } from './sql.js';

/** The statements both grant plans share (grant.sql.ts). */

/**
 * Locks the keys' rows in key order and counts them; also notes when the batch started on the
 * server (a statement's clock is fixed when it starts, before any lock wait), so the caller can
 * tell how much later than its send time the lease started counting.
 */
export function lockKeyRows(input: GrantInput, writerWaiting: string): string {
  return format(`SELECT COUNT(*), ${writerWaiting}, ${NOW} INTO @dbl_rows, @dbl_ww, @dbl_t0 FROM ${LOCK_TABLE} WHERE lock_key IN (?) FOR UPDATE`, [
    input.targets.map((t) => t.bytes),
  ]);
}

/** Bounds every statement of a plan on the server (see GrantInput.statementLimit). */
export function bound(input: GrantInput, statements: string[]): string[] {
  const limit = input.statementLimit;
  if (!limit) return statements;
  const ms = Math.max(1, Math.ceil(limit.ms));
  const mariadb = limit.kind === 'mariadb' ? mariadbBound(ms) : undefined;
  return statements.map((sql) => {
    if (sql.startsWith('START') || sql.startsWith('COMMIT') || sql.startsWith('SET ')) return sql;
    if (mariadb) return mariadb + sql;
    return /^SELECT .* FOR UPDATE$/s.test(sql) ? sql.replace(/^SELECT /, `SELECT /*+ MAX_EXECUTION_TIME(${ms}) */ `) : sql;
  });
}

let lastBound = { ms: NaN, sql: '' };
/** MariaDB's bound as a statement prefix, kept for the next grant: callers with one timeout ask with the same bound. */
function mariadbBound(ms: number): string {
  if (ms !== lastBound.ms) lastBound = { ms, sql: `SET STATEMENT max_statement_time = ${(ms / 1000).toFixed(3)} FOR ` };
  return lastBound.sql;
}

export function waitedMs(summary: Record<string, unknown>): number {
  return Math.max(0, Number(summary.waited_us ?? 0) / 1000);
}

export function shape(input: GrantInput) {
  const keys = input.targets.map((t) => t.bytes);
  return { keys, n: keys.length, conflict: conflictingHolders(input.targets) };
}

/**
 * The condition on a log row `g` that it is a holder the targets conflict with (its status left
 * to the caller): a writer conflicts with every holder of its key, a reader with writers and with
 * a semaphore's permits (a key is a lock or a semaphore, never both at once).
 */
export function conflictingHolders(targets: readonly LockTarget[]): { sql: string; values: unknown[] } {
  const writeKeys = targets.filter((t) => t.mode === 'write').map((t) => t.bytes);
  const readKeys = targets.filter((t) => t.mode === 'read').map((t) => t.bytes);
  const parts: string[] = [];
  const values: unknown[] = [];
  if (writeKeys.length > 0) {
    parts.push('g.lock_key IN (?)');
    values.push(writeKeys);
  }
  if (readKeys.length > 0) {
    parts.push(`(g.lock_key IN (?) AND g.mode <> 'read')`);
    values.push(readKeys);
  }
  return { sql: parts.join(' OR '), values };
}

export function grantWrites(input: GrantInput, granted: string): string[] {
  const keys = input.targets.map((t) => t.bytes);
  const writeKeys = input.targets.filter((t) => t.mode === 'write').map((t) => t.bytes);
  const readKeys = input.targets.filter((t) => t.mode === 'read').map((t) => t.bytes);
  const mode = readKeys.length === 0 ? `'write'` : writeKeys.length === 0 ? `'read'` : format(`IF(l.lock_key IN (?), 'read', 'write')`, [readKeys]);
  // Where tokens are claimed, a one-INSERT grant may have claimed a key's next token since the decision's read
  // view: the UPDATE decides again per key row, in the same view as the token it hands out (a claim after it then
  // collides with our log row), and the grant stands only if every row was taken (a skipped token is harmless).
  const lateClaims = input.claims
    ? format(
        ` AND NOT EXISTS (SELECT 1 FROM ${LOCK_LOG_TABLE} g WHERE g.lock_key = ${LOCK_TABLE}.lock_key AND g.status IN ${LIVE_STATUSES_SQL} ` +
          `AND g.owner <> ? AND (${writeKeys.length > 0 ? format(`${LOCK_TABLE}.lock_key IN (?) OR `, [writeKeys]) : ''}g.mode <> 'read'))`,
        [input.acquisitionId],
      )
    : '';
  return [
    format(
      `UPDATE ${LOCK_TABLE} SET fencing_token = ${nextTokenSql(`${LOCK_TABLE}.lock_key`, input.claims === true)}, last_granted_at = ${NOW}, ${LEASE_GRANTED}` +
        (writeKeys.length > 0 ? `, writer_waiting_until = IF(lock_key IN (?), NULL, writer_waiting_until)` : '') +
        ` WHERE lock_key IN (?) AND ${granted}${lateClaims}`,
      writeKeys.length > 0 ? [writeKeys, keys] : [keys],
    ),
    ...(input.claims ? [`SET ${granted} = (${granted} AND ROW_COUNT() = ${keys.length})`] : []),
    format(
      `INSERT INTO ${LOCK_LOG_TABLE} (lock_key, mode, owner, holder, process_id, strategy, fencing_token, status, lease_ms, acquired_at, expires_at, wait_ms) ` +
        // The insert's own clock: a holder's interval starts after the decision's read view, never
        // before the previous holder's release (an earlier timestamp would show false overlaps).
        `SELECT l.lock_key, ${mode}, ?, ?, ?, ?, l.fencing_token, '${LockStatus.ACQUIRED}', ?, ${NOW}, ${NOW} + INTERVAL ? MICROSECOND, ? ` +
        `FROM ${LOCK_TABLE} l WHERE l.lock_key IN (?) AND ${granted}`,
      [input.acquisitionId, input.holder, input.processId, input.strategy, input.leaseMs, input.leaseMs * 1000, Math.round(input.waitedMs), keys],
    ),
  ];
}

/** A waiting writer holds back new readers (writer preference); refreshed only when less than half of the mark is left. */
export function writerMark(input: GrantInput): string[] {
  const writeKeys = input.targets.filter((t) => t.mode === 'write').map((t) => t.bytes);
  if (writeKeys.length === 0 || input.writerWaitMarkMs <= 0) return [];
  return [
    format(
      `UPDATE ${LOCK_TABLE} SET writer_waiting_until = ${NOW} + INTERVAL ? MICROSECOND WHERE lock_key IN (?) AND NOT @dbl_granted ` +
        `AND (writer_waiting_until IS NULL OR writer_waiting_until < ${NOW} + INTERVAL ? MICROSECOND)`,
      [input.writerWaitMarkMs * 1000, writeKeys, input.writerWaitMarkMs * 500],
    ),
  ];
}

/** The outcome of a single-key grant: its row read back by primary key (the insert id). */
export function singleOutcomeQuery(summary: string): string {
  const [busy, expired, reclaimed] = summary.split(',').map((s) => s.trim());
  return (
    `SELECT @dbl_granted AS granted, @dbl_rows AS key_rows, ${busy} AS busy, ${expired} AS expired, @dbl_ww AS writer_waiting, ${reclaimed} AS reclaimed, ` +
    `g.id, g.lock_key, g.fencing_token, g.expires_at, TIMESTAMPDIFF(MICROSECOND, @dbl_t0, g.acquired_at) AS waited_us, @dbl_t0 AS started_at ` +
    `FROM (SELECT 1 AS one) AS o LEFT JOIN ${LOCK_LOG_TABLE} g ON @dbl_granted AND g.id = LAST_INSERT_ID()`
  );
}

/** One summary row when not granted; one row per granted key otherwise (the summary repeated on each). */
export function outcomeQuery(input: GrantInput, summary: string): string {
  const [rows, busy, expired, ww, reclaimed] = summary.split(',').map((s) => s.trim());
  return format(
    `SELECT @dbl_granted AS granted, ${rows} AS key_rows, ${busy} AS busy, ${expired} AS expired, ${ww} AS writer_waiting, ${reclaimed} AS reclaimed, ` +
      `g.id, g.lock_key, g.fencing_token, g.expires_at, TIMESTAMPDIFF(MICROSECOND, @dbl_t0, g.acquired_at) AS waited_us, @dbl_t0 AS started_at ` +
      `FROM (SELECT 1 AS one) AS o LEFT JOIN ${LOCK_LOG_TABLE} g ON @dbl_granted AND g.id >= LAST_INSERT_ID() AND g.owner = ?`,
    [input.acquisitionId],
  );
}

export function toGrantedRow(row: Record<string, unknown>): GrantedRow {
  return {
    id: String(row.id),
    storedKey: keyText(row.lock_key),
    fencingToken: Number(row.fencing_token),
    expiresAt: parseDate(row.expires_at),
  };
}
