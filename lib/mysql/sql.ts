import mysql from 'mysql2';

/**
 * The one SQL toolkit every statement builder uses: client-side escaping (after keys and numbers
 * were validated), the server clock, table names, statuses and row parsing. Every time the
 * library compares lives on the database server's UTC clock, so client clocks, session time
 * zones and DST changes never enter a lease decision.
 */
export const format = (sql: string, values: readonly unknown[]): string => mysql.format(sql, values as Parameters<typeof mysql.format>[1]);

/** The server's clock, immune to the session's `time_zone`. Fixed per statement by the server. */
export const NOW = 'UTC_TIMESTAMP(6)';

/** Milliseconds from a DATETIME(6) column to now, on the server. */
export const msSince = (column: string): string => `TIMESTAMPDIFF(MICROSECOND, ${column}, ${NOW}) DIV 1000`;

/** Table names. Fixed: the entities and the migrations are declared against them. */
export const LOCK_TABLE = 'db_lock';
export const LOCK_LOG_TABLE = 'db_lock_log';
export const PROCESS_TABLE = 'db_lock_process';
export const ROW_LOCK_TABLE = 'db_lock_row_lock';

/**
 * Log-row statuses. ACQUIRED and COMPLETED are live (the holder still owns the key); the others
 * are terminal.
 * - ACQUIRED: granted, business work may be running.
 * - COMPLETED: a fenced business transaction committed under it; the lock is still held.
 * - RELEASED: given back by its holder. FAILED: given back after the business work failed.
 * - EXPIRED: its lease ran out and another holder (or the janitor) reclaimed it, or (row-lock)
 *   its holder's connection closed before the transaction ended.
 */
export const LockStatus = Object.freeze({
  /** Granted and live. */
  ACQUIRED: 'ACQUIRED',
  /** Live; an outer fenced transaction committed under it. */
  COMPLETED: 'COMPLETED',
  /** Given back by its holder (or force-released). */
  RELEASED: 'RELEASED',
  /** Ended with its holder's work failed (rolled back). */
  FAILED: 'FAILED',
  /** Its lease ran out and another holder or the janitor took it over. */
  EXPIRED: 'EXPIRED',
} as const);
export type LockStatus = (typeof LockStatus)[keyof typeof LockStatus];

/** SQL list of the live statuses. */
export const LIVE_STATUSES_SQL = `('${LockStatus.ACQUIRED}', '${LockStatus.COMPLETED}')`;

/** Terminal statuses a holder ends itself with. */
export type EndStatus = typeof LockStatus.RELEASED | typeof LockStatus.FAILED;

/** Column values of `db_lock_log.strategy`. */
export type StrategyColumn = 'lease' | 'row-lock';

/** Key bytes as read back (VARBINARY) to the stored key text. */
export function keyText(value: unknown): string {
  return Buffer.isBuffer(value) ? value.toString('utf8') : String(value);
}

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
