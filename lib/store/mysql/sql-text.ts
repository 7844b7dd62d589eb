import { LockStatus } from '../../core/lock-status.js';
import { LOCK_LOG_TABLE, PROCESS_TABLE } from '../tables.js';
import type { LockStrategyName } from '../../strategies/lock-strategy-name.js';

/**
 * The SQL toolkit's text half: the server clock, table names, statuses, literals the library
 * writes by hand and row parsing. Free of the driver, so that the migrations (which a PostgreSQL
 * app loads too) can use it without mysql2; sql.ts adds mysql2's escaping and re-exports it all.
 * Every time the library compares lives on the database server's UTC clock, so client clocks,
 * session time zones and DST changes never enter a lease decision.
 */
/** A count or duration for an unsigned column, rounded: an audit figure never fails the statement it rides in (NaN, negative: 0). */
export const sqlInteger = (value: number): string => (Number.isFinite(value) && value > 0 ? String(Math.round(value)) : '0');

/** A key's bytes as an SQL literal (as format() writes a Buffer). */
export const keyLiteral = (bytes: Buffer): string => `X'${bytes.toString('hex')}'`;

const keyLiterals = new WeakMap<Buffer, string>();
/**
 * keyLiteral, written once per Buffer: a key's target (its bytes included) is built once and shared
 * by every request for it, and statements on every hold's path name its key.
 */
export function sharedKeyLiteral(bytes: Buffer): string {
  let literal = keyLiterals.get(bytes);
  if (literal === undefined) keyLiterals.set(bytes, (literal = keyLiteral(bytes)));
  return literal;
}

/** A row id (an unsigned BIGINT the driver gave as a string or number) as an SQL literal. */
export const rowIdLiteral = (id: string): string => (/^\d{1,20}$/.test(id) ? id : String(Number(id)));

/** The server's clock, immune to the session's `time_zone`. Fixed per statement by the server. */
export const NOW = 'UTC_TIMESTAMP(6)';

/**
 * The server's clock when the expression is evaluated, not when its statement began: the
 * statement's start plus the time since (SYSDATE(6) against NOW(6), both in the session's zone, so
 * their difference is not; `--sysdate-is-now` makes it NOW, the statement's start). For a grant's
 * log row, whose INSERT can wait in its token's subquery for the previous holder's release to
 * commit: a holder's interval must begin after that release, not when its statement began waiting
 * (an earlier start would show two holders at once in the log). Written after the token's value.
 */
export const EVALUATED_NOW = `(${NOW} + INTERVAL TIMESTAMPDIFF(MICROSECOND, NOW(6), SYSDATE(6)) MICROSECOND)`;

/** Milliseconds from a DATETIME(6) column to now, on the server. */
export const msSince = (column: string): string => `TIMESTAMPDIFF(MICROSECOND, ${column}, ${NOW}) DIV 1000`;

export { LOCK_LOG_TABLE, LOCK_TABLE, PROCESS_TABLE, ROW_LOCK_TABLE } from '../tables.js';
export { type EndStatus, LockStatus } from '../../core/lock-status.js';

/** SQL list of the live statuses. */
export const LIVE_STATUSES_SQL = `('${LockStatus.ACQUIRED}', '${LockStatus.COMPLETED}')`;

/**
 * Part of every lease grant's UPDATE of a key row: a lease holder of the key may now be live, so a
 * row-lock must read the log before it takes the key (the one-UPDATE path is closed; see row-lock.sql.ts).
 */
export const LEASE_GRANTED = 'no_lease_holders = 0';

/** The unique index on `(lock_key, token_claim)`: present once AddTokenClaims ran (see docs/notes/lease-grant-data-model.md). */
export const CLAIM_INDEX = 'uq_db_lock_log_key_claim';

/**
 * The token a log row claims for its key: every lease-side row, and a row-lock take's claim row;
 * not a row-lock audit row (its token is the key row's, and readers share the writer's).
 */
export const TOKEN_CLAIM_EXPRESSION = `IF(\`strategy\` = 'row-lock' AND \`status\` <> 'CLAIMED', NULL, \`fencing_token\`)`;

/**
 * The key's current token where fast grants claim tokens without the key row: the row's token, or
 * a claim above it (one dive into the claim index). `key` must name the locked row's column, never
 * a constant: a constant subquery is evaluated before the row lock is waited for, and its read view
 * would then hide from the statement's other reads what the previous holder committed.
 */
export function currentTokenSql(key: string, claims: boolean, column = 'fencing_token'): string {
  return claims ? `GREATEST(${column}, COALESCE(${newestClaimSql(key, 'c')}, 0))` : column;
}

/** The key's next token: one above its current one (see currentTokenSql). */
export function nextTokenSql(key: string, claims: boolean, column = 'fencing_token'): string {
  return `${currentTokenSql(key, claims, column)} + 1`;
}

/**
 * `value` (default: the token) of the newest claim of `key`, NULL when it has none: one dive into
 * the claim index. Written as ORDER BY … LIMIT 1 on that index, not MAX(): correlated to another
 * table's column, MAX() is not optimized away, and MariaDB walked every log row of the key through
 * (lock_key, status) instead (20,000 rows of a hot key's history: 14 ms per grant, against 5 µs).
 */
export function newestClaimSql(key: string, alias: string, value = `${alias}.token_claim`): string {
  return (
    `(SELECT ${value} FROM ${LOCK_LOG_TABLE} ${alias} FORCE INDEX (${CLAIM_INDEX}) ` +
    `WHERE ${alias}.lock_key = ${key} AND ${alias}.token_claim IS NOT NULL ORDER BY ${alias}.token_claim DESC LIMIT 1)`
  );
}

/** Column values of `db_lock_log.strategy`. */
export type StrategyColumn = LockStrategyName;

/**
 * A holder's lease end (log row `g`, its process row `p`): its own (grant or extend) or its
 * process's latest renewal plus its lease, whichever is later.
 */
export const EFFECTIVE_EXPIRY = `GREATEST(g.expires_at, COALESCE(p.renewed_at + INTERVAL g.lease_ms * 1000 MICROSECOND, g.expires_at))`;

/**
 * Ends the live log rows `g` that `where` picks as `status`, its first parameter their note, and
 * tells each holder's process (`ended_count`), which its next renewal reads: the one statement of
 * every takeover (grants, row-lock, janitor) and of a forced release.
 */
export function endHoldersStatement(status: LockStatus, where: string): string {
  return (
    `UPDATE ${LOCK_LOG_TABLE} g LEFT JOIN ${PROCESS_TABLE} p ON p.id = g.process_id ` +
    `SET g.status = '${status}', g.ended_at = ${NOW}, g.hold_ms = ${msSince('g.acquired_at')}, g.note = ?, p.ended_count = p.ended_count + 1 ` +
    `WHERE ${where}`
  );
}

export { keyText } from '../key-text.js';

/** DATETIME(6) strings from the server, in UTC. Millisecond precision is all a Date holds. */
export function parseDate(value: unknown): Date {
  if (value instanceof Date) return value;
  return new Date(String(value).replace(' ', 'T') + 'Z');
}

/** A result row as a plain record. */
export type Row = Record<string, unknown>;

/** One statement's result inside a multi-statement round trip: a row list or an OK packet. */
export type StatementResult = Row[] | { affectedRows: number; insertId?: number | string };

export function rowsOf(result: unknown): Row[] {
  return Array.isArray(result) ? (result as Row[]) : [];
}

export function affectedRowsOf(result: unknown): number {
  return Number((result as { affectedRows?: unknown } | undefined)?.affectedRows ?? 0);
}
