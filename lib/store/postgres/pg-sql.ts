import pg from 'pg';
import { LockStatus } from '../../core/lock-status.js';

export { LOCK_LOG_TABLE, LOCK_TABLE, PROCESS_TABLE, ROW_LOCK_TABLE } from '../tables.js';
export { LockStatus } from '../../core/lock-status.js';

/**
 * The PostgreSQL store's SQL toolkit: literals written by hand (keys and numbers are validated
 * before they get here), the server clock, statuses and row parsing. Statements carry their values
 * inline, so that several go in one simple-query round trip (the extended protocol takes one).
 */

/**
 * The server's clock when the expression is evaluated. `now()` is fixed at the transaction's
 * start, and a grant that waited for a row lock would date itself before the release it waited for.
 */
export const NOW = 'clock_timestamp()';

/** A key's bytes as a bytea literal (hex: exact bytes, NUL included). */
export const keyLiteral = (bytes: Buffer): string => `'\\x${bytes.toString('hex')}'::bytea`;

/** Several keys as an SQL list of bytea literals. */
export const keyList = (keys: readonly Buffer[]): string => keys.map(keyLiteral).join(', ');

/** A string as an SQL literal. */
export const textLiteral = (value: string): string => pg.escapeLiteral(value);

/** A nullable string as an SQL literal. */
export const nullableText = (value: string | null | undefined): string => (value === null || value === undefined ? 'NULL' : textLiteral(value));

/** A count or duration, rounded: an audit figure never fails the statement it rides in (NaN, negative: 0). */
export const sqlInteger = (value: number): string => (Number.isFinite(value) && value > 0 ? String(Math.round(value)) : '0');

/** A row id (a bigint the driver gave as a string) as an SQL literal. */
export const rowIdLiteral = (id: string): string => (/^\d{1,19}$/.test(id) ? id : String(Math.trunc(Number(id)) || 0));

/** Milliseconds from a timestamptz column to now, on the server. */
export const msSince = (column: string): string => `floor(extract(epoch FROM (${NOW} - ${column})) * 1000)::bigint`;

/** A duration in milliseconds as an interval. */
export const msInterval = (ms: string | number): string => `(${ms}) * interval '1 millisecond'`;

/** SQL list of the live statuses. */
export const LIVE_STATUSES_SQL = `('${LockStatus.ACQUIRED}', '${LockStatus.COMPLETED}')`;

/**
 * A holder's lease end (log row `g`, its process row `p`): its own or its process's latest renewal
 * plus its lease, whichever is later (as on MySQL).
 */
export const EFFECTIVE_EXPIRY = `GREATEST(g.expires_at, COALESCE(p.renewed_at + ${msInterval('g.lease_ms')}, g.expires_at))`;

/** Key bytes as read back (bytea) to the stored key text. */
export function keyText(value: unknown): string {
  return Buffer.isBuffer(value) ? value.toString('utf8') : String(value);
}

/** A timestamptz as the driver returns it. */
export function parseDate(value: unknown): Date {
  return value instanceof Date ? value : new Date(String(value));
}

export type Row = Record<string, unknown>;

/** The results of a round trip, one per statement (pg answers one object for a single statement). */
export function resultsOf(answer: pg.QueryResult | pg.QueryResult[]): pg.QueryResult[] {
  return Array.isArray(answer) ? answer : [answer];
}
