import mysql from 'mysql2';
import { newestClaimSql, NOW } from './sql-text.js';

/**
 * The one SQL toolkit every statement builder uses: client-side escaping by mysql2 (after keys and
 * numbers were validated), and everything in sql-text.ts (the server clock, table names, statuses
 * and row parsing).
 */
export const format = (sql: string, values: readonly unknown[]): string => mysql.format(sql, values as Parameters<typeof mysql.format>[1]);

/** One value as an SQL literal (strings escaped), for statements built by hand on hot paths. */
export const escape = (value: string | number): string => mysql.escape(value);

/**
 * How long after the key's newest claim ended a bell held by another session keeps the turn. The
 * waiter a ring woke grants in the round trip of its wait, within milliseconds; a bell still held
 * this long after the key came free belongs to a waiter that stopped (a frozen process, a host cut
 * off with its connection still open), and must not keep everyone else from a free key.
 */
export const BELL_TURN_MS = 2_000;

/**
 * True while no other session holds the key's doorbell: a waiter queued there first has the next
 * turn. With `key` (an SQL expression of the key, where tokens are claimed) also once the key's
 * newest claim ended more than BELL_TURN_MS ago (or is live, which the grant refuses anyway).
 */
export function ourTurnSql(doorbell: string, key?: string): string {
  const turn = `COALESCE(IS_USED_LOCK(${escape(doorbell)}), CONNECTION_ID()) = CONNECTION_ID()`;
  return key === undefined ? turn : `(${turn} OR ${bellOutlivedSql(key)})`;
}

/**
 * ourTurnSql for a statement on a connection that holds no bell (the pool's: bells live on
 * connections kept out of it, and give their named lock back before they return): nobody holds the
 * bell. The server evaluates it measurably faster (about 25 µs per grant on the machine measured).
 */
export function bellFreeSql(doorbell: string): string {
  return `IS_FREE_LOCK(${escape(doorbell)})`;
}

/** The key's newest claim ended more than BELL_TURN_MS ago, or is still live (see ourTurnSql). */
function bellOutlivedSql(key: string): string {
  return `COALESCE(${newestClaimSql(key, 'bt', 'bt.ended_at')}, '1970-01-01') < ${NOW} - INTERVAL ${BELL_TURN_MS * 1000} MICROSECOND`;
}

export * from './sql-text.js';
