import { createHash } from 'node:crypto';
import pg from 'pg';
import { INTERNAL_KEY_BYTE } from '../../core/internal-keys.js';
import { LockStatus } from '../../core/lock-status.js';
import { LOCK_LOG_TABLE, PROCESS_TABLE } from '../tables.js';

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

/**
 * The longest a statement of the library's own sessions waits for a row lock (their lock_timeout):
 * a row-lock holder keeps its key row for its whole transaction, and a lease grant must not hold a
 * pool connection that long. A wait cut here is a failed try; the caller's queue asks again within
 * its budget.
 */
export const LOCK_WAIT_MS = 1_000;

/** A grant transaction's lock waits bounded by `waitMs` when that is shorter than the sessions' LOCK_WAIT_MS (for this transaction only). */
export const grantWaitBound = (waitMs: number): string[] =>
  waitMs < LOCK_WAIT_MS ? [`SELECT set_config('lock_timeout', '${Math.max(1, Math.ceil(waitMs))}ms', true)`] : [];

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

export { keyText } from '../key-text.js';

/** The first internal key: user keys sort below it (internal keys start with a byte UTF-8 never has). */
export const FIRST_INTERNAL_KEY = keyLiteral(Buffer.from([INTERNAL_KEY_BYTE]));

/**
 * The CTEs that end the live log rows `g` which `due` (a CTE of their ids) names as `status`, with
 * `note`, and tell each holder's process (`ended_count`), which its next renewal reads: `ended`
 * answers the rows it ended. Every takeover on PostgreSQL (the janitor, a forced release) goes this way.
 */
export function endHoldersCtes(status: string, note: string): string {
  // `due` may be read in the statement's snapshot (a grant's takeover reads it so); the UPDATE
  // tests only its own WHERE again on a row's newest version. An extend that committed meanwhile
  // moved the row's expires_at, so an EXPIRED end tests it here: EFFECTIVE_EXPIRY is never
  // earlier than it. (A renewal of the holder's process cannot land meanwhile: the takeover
  // locks the process rows FOR SHARE first.)
  const stillDue = status === LockStatus.EXPIRED ? ` AND g.expires_at <= ${NOW}` : '';
  return (
    `ended AS (UPDATE ${LOCK_LOG_TABLE} g SET status = ${textLiteral(status)}, ended_at = ${NOW}, hold_ms = ${msSince('g.acquired_at')}, ` +
    `note = ${textLiteral(note)} FROM due WHERE g.id = due.id AND g.status IN ${LIVE_STATUSES_SQL}${stillDue} ` +
    `RETURNING g.lock_key, g.owner, g.holder, g.mode, g.fencing_token, g.process_id), ` +
    `told AS (UPDATE ${PROCESS_TABLE} p SET ended_count = p.ended_count + n.c ` +
    `FROM (SELECT process_id, count(*) AS c FROM ended GROUP BY process_id) n WHERE p.id = n.process_id)`
  );
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

/**
 * A 64-bit advisory-lock key for `storedKey` in one of the library's own namespaces (`use`): a hash,
 * so two keys may share one (a collision costs a wait, never a wrong grant: the keys' rows decide).
 */
export function advisoryKey(use: 'bell' | 'row', storedKey: string): string {
  const named = `${use}\0${storedKey}`;
  let key = advisoryKeys.get(named);
  if (key === undefined) {
    key = createHash('sha1').update(`nestjs-db-lock ${use}\0`).update(storedKey).digest().readBigInt64BE(0).toString();
    if (advisoryKeys.size >= ADVISORY_KEYS_KEPT) advisoryKeys.clear();
    advisoryKeys.set(named, key);
  }
  return key;
}

/**
 * Hashes of the keys a process takes often: every take of a hot key hashes it, which cost about
 * 13 µs of client CPU per take (a sha1 object each time). Bounded: emptied when full, so a
 * stream of one-off keys costs the hash as before and no more memory than this many entries.
 */
const advisoryKeys = new Map<string, string>();
const ADVISORY_KEYS_KEPT = 4096;
