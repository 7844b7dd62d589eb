import { type FailureKind, registerFailureClassifier } from '../lock-statement.error.js';

/**
 * PostgreSQL's SQLSTATEs and the pg driver's own failures read as the store's failure kinds (see
 * FailureKind). Unlike InnoDB, PostgreSQL ends the whole transaction on any failed statement: a
 * caller that keeps its transaction after a refused take must have taken it under a savepoint.
 */

/** lock_timeout ran out, or NOWAIT found the row locked. */
export const LOCK_NOT_AVAILABLE = '55P03';
/** Deadlock: the transaction was rolled back. */
export const DEADLOCK_DETECTED = '40P01';

const RETRY = new Set([LOCK_NOT_AVAILABLE, DEADLOCK_DETECTED, '40001' /* serialization failure */, '23505' /* a unique key taken first */]);
const INTERRUPTED = new Set(['57014' /* statement_timeout or a cancel request */]);
const CONNECTION_LOST = new Set([
  '57P01' /* terminated by an administrator (pg_terminate_backend) */,
  '57P02' /* crash shutdown */,
  '08003' /* connection does not exist */,
  '08006' /* connection failure */,
  '08007' /* transaction resolution unknown */,
]);
const UNREACHABLE = new Set(['53300' /* too many connections */, '57P03' /* cannot connect now */, '08001', '08004']);
const DENIED = new Set(['42501' /* insufficient privilege */]);
const SCHEMA = new Set(['42P01' /* undefined table */, '42703' /* undefined column */, '3D000' /* no such database */]);
const NETWORK_LOST = new Set(['ECONNRESET', 'EPIPE', 'ERR_STREAM_DESTROYED']);
const NETWORK_UNREACHABLE = new Set(['ECONNREFUSED', 'ETIMEDOUT', 'ENOTFOUND', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN']);
/** The pg client's own messages for a connection that broke or was closed under a query (they carry no code). */
const LOST_MESSAGES = /Connection terminated|connection error and is not queryable|Client was closed and is not queryable|Query read timeout/;

/** The SQLSTATE of a server error, if `error` is one (the driver's DatabaseError has a severity). */
export function sqlStateOf(error: unknown): string | undefined {
  const e = error as { code?: unknown; severity?: unknown } | null;
  return typeof e?.code === 'string' && typeof e.severity === 'string' ? e.code : undefined;
}

/** The kind of a failure of a PostgreSQL statement; undefined when `error` is none of PostgreSQL's or pg's. */
export function classifyPostgres(error: unknown): FailureKind | undefined {
  const state = sqlStateOf(error);
  if (state !== undefined) {
    if (RETRY.has(state)) return 'retry';
    if (INTERRUPTED.has(state)) return 'interrupted';
    if (CONNECTION_LOST.has(state)) return 'connection-lost';
    if (UNREACHABLE.has(state)) return 'unreachable';
    if (DENIED.has(state) || state.startsWith('28')) return 'denied';
    if (state === '25006') return 'read-only';
    if (SCHEMA.has(state)) return 'schema';
    return 'other';
  }
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && NETWORK_LOST.has(code)) return 'connection-lost';
  if (typeof code === 'string' && NETWORK_UNREACHABLE.has(code)) return 'unreachable';
  if (error instanceof Error && LOST_MESSAGES.test(error.message)) return 'connection-lost';
  if (error instanceof Error && /timeout exceeded when trying to connect/.test(error.message)) return 'unreachable';
  return undefined;
}

registerFailureClassifier((error) => {
  const kind = classifyPostgres(error);
  return kind === 'other' ? undefined : kind;
});
