import { type FailureKind, registerFailureClassifier } from '../lock-statement.error.js';

export type { FailureKind };

/** MySQL/MariaDB errnos and mysql2 codes read as the store's failure kinds (see FailureKind). */

/** Lock wait timeout: only the statement was rolled back; the transaction is still open (never COMMIT it). */
export const ER_LOCK_WAIT_TIMEOUT = 1205;
/** Deadlock, or a Galera certification failure / brute-force abort: the whole transaction was rolled back. */
export const ER_LOCK_DEADLOCK = 1213;
/** MariaDB innodb_snapshot_isolation: "Record has changed since last read"; the transaction was rolled back. */
export const ER_CHECKREAD = 1020;
/** The AUTO-INC lock of an INSERT … SELECT waited past innodb_lock_wait_timeout: a lock-wait timeout in all but name. */
export const ER_AUTOINC_READ_FAILED = 1467;
/** KILL QUERY. */
export const ER_QUERY_INTERRUPTED = 1317;
/** MariaDB max_statement_time. */
export const ER_STATEMENT_TIMEOUT = 1969;
/** MySQL MAX_EXECUTION_TIME. */
export const ER_QUERY_TIMEOUT = 3024;
/** MySQL 8 NOWAIT on a locked row. */
export const ER_LOCK_NOWAIT = 3572;
/** Lost connection to the server during a query (client side). */
export const CR_SERVER_LOST = 2013;
export const CR_SERVER_GONE = 2006;

/** Duplicate key: a claimed token taken by another grant first (see fast-grant.sql.ts); a grant then decides again. */
export const ER_DUP_ENTRY = 1062;
const RETRY = new Set([ER_LOCK_WAIT_TIMEOUT, ER_LOCK_DEADLOCK, ER_CHECKREAD, ER_AUTOINC_READ_FAILED, ER_DUP_ENTRY]);
const INTERRUPTED = new Set([ER_QUERY_INTERRUPTED, ER_STATEMENT_TIMEOUT, ER_QUERY_TIMEOUT, 1028 /* ER_FILSORT_ABORT: sort aborted by KILL */]);
const CONNECTION_LOST_ERRNO = new Set([
  CR_SERVER_LOST,
  CR_SERVER_GONE,
  1053 /* server shutdown in progress */,
  1927 /* connection killed */,
  4031 /* MySQL: disconnected by the server for inactivity */,
]);
const CONNECTION_LOST_CODES = new Set(['PROTOCOL_CONNECTION_LOST', 'ECONNRESET', 'EPIPE', 'PROTOCOL_SEQUENCE_TIMEOUT', 'ERR_STREAM_DESTROYED']);
const UNREACHABLE_ERRNO = new Set([
  1040 /* too many connections */, 1203 /* max_user_connections */, 1226 /* a user's MAX_USER_CONNECTIONS (or another resource limit) reached */,
  1129 /* host blocked */, 1130 /* host not allowed */, 1047 /* Galera: WSREP has not yet prepared node for application use */,
  1180 /* Galera: got error from storage engine during commit when not ready */, 2002, 2003, 2005,
]);
const UNREACHABLE_CODES = new Set(['ECONNREFUSED', 'ETIMEDOUT', 'ENOTFOUND', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN', 'POOL_CLOSED']);
const DENIED = new Set([1044, 1045, 1142, 1143, 1227, 1370, 1698]);
const READ_ONLY = new Set([1290, 1792, 1836 /* read-only (replica) */]);
const SCHEMA = new Set([1146, 1054, 1049]);

export function errnoOf(error: unknown): number | undefined {
  const errno = (error as { errno?: unknown } | null)?.errno;
  return typeof errno === 'number' ? errno : undefined;
}

export function codeOf(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}

export function classify(error: unknown): FailureKind {
  const errno = errnoOf(error);
  const code = codeOf(error);
  if (errno !== undefined) {
    if (RETRY.has(errno)) return 'retry';
    if (INTERRUPTED.has(errno)) return 'interrupted';
    if (CONNECTION_LOST_ERRNO.has(errno)) return 'connection-lost';
    if (UNREACHABLE_ERRNO.has(errno)) return 'unreachable';
    if (DENIED.has(errno)) return 'denied';
    if (READ_ONLY.has(errno)) return 'read-only';
    if (SCHEMA.has(errno)) return 'schema';
  }
  if (code !== undefined) {
    if (CONNECTION_LOST_CODES.has(code)) return 'connection-lost';
    if (UNREACHABLE_CODES.has(code)) return 'unreachable';
  }
  // mysql2 marks errors that killed the connection as fatal; the statement's outcome is unknown.
  if ((error as { fatal?: unknown } | null)?.fatal === true) return 'connection-lost';
  return 'other';
}

/** The server rolled back the statement or transaction; the same statement may simply be sent again. */
export function isTransient(error: unknown): boolean {
  return classify(error) === 'retry';
}

registerFailureClassifier((error) => {
  const kind = classify(error);
  return kind === 'other' ? undefined : kind;
});
