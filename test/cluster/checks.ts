import type mysql from 'mysql2/promise';
import { AUDIT_TABLE, COUNTER_TABLE } from './sections.js';
import type { Belief } from './types.js';

/** What the checks found for one key. Every count but `sections` is a violation when > 0 (except under the unlocked control). */
export interface KeyVerdict {
  readonly key: string;
  /** Committed sections (audit rows). */
  readonly sections: number;
  /** withLock holds whose holder's view was recorded. */
  readonly holds: number;
  /** Sections whose server interval [read, write] began before an earlier section's write. */
  readonly overlaps: number;
  /** Committed sections minus the counter's final value. */
  readonly lostUpdates: number;
  /** Sections that read a value another committed section had read too. */
  readonly sameValueRead: number;
  /** In server order of the reads, a token not greater than the one before. */
  readonly tokenOrder: number;
  /** Tokens granted twice for the key (log rows or audit rows). */
  readonly duplicateTokens: number;
  /**
   * Consecutive log rows (by token) where the next row's acquired_at is earlier than the previous
   * row's ended_at. Informational, not a violation: on a Galera node every statement of one
   * multi-statement batch sees the batch's start time (measured), so a batched grant that waited
   * stamps its row with a time from before the release it waited for.
   */
  readonly logOverlaps: number;
  /** withLock holders whose own view of holding (grant to release or abort) overlapped another's. */
  readonly beliefOverlaps: number;
}

type Row = Record<string, unknown>;

async function rows(conn: mysql.Connection, sql: string, values: unknown[] = []): Promise<Row[]> {
  const [result] = await conn.query(sql, values);
  return result as Row[];
}

/**
 * Checks one key from the audit table (server timestamps, values read, tokens), the lock log and
 * the holders' beliefs. `tokens`: false for the unlocked control (it has none).
 */
export async function checkKey(conn: mysql.Connection, key: string, beliefs: readonly Belief[], tokens = true): Promise<KeyVerdict> {
  const audit = await rows(
    conn,
    `SELECT token, value_read, DATE_FORMAT(t_read, '%Y-%m-%d %H:%i:%s.%f') AS t_read, DATE_FORMAT(t_write, '%Y-%m-%d %H:%i:%s.%f') AS t_write ` +
      `FROM ${AUDIT_TABLE} WHERE k = ? ORDER BY t_read, id`,
    [key],
  );
  const [counter] = await rows(conn, `SELECT value FROM ${COUNTER_TABLE} WHERE k = ?`, [key]);
  let overlaps = 0;
  let tokenOrder = 0;
  let lastWrite = '';
  let lastToken = -Infinity;
  for (const row of audit) {
    if (String(row.t_read) < lastWrite) overlaps++;
    if (String(row.t_write) > lastWrite) lastWrite = String(row.t_write);
    const token = Number(row.token);
    if (tokens && token <= lastToken) tokenOrder++;
    lastToken = Math.max(lastToken, token);
  }
  const values = audit.map((r) => Number(r.value_read));
  const sameValueRead = values.length - new Set(values).size;
  const auditTokens = tokens ? audit.map((r) => Number(r.token)) : [];
  const log = tokens ? await logRows(conn, key) : [];
  // A row-lock hold's token is bumped inside its own transaction: a hold that rolled back (here
  // also: lost certification to a holder on another node) gets its terminal row afterwards with a
  // token the next holder is handed again. Uniqueness is owed among committed holds only: every
  // lease row, and row-lock rows written in their commit (RELEASED).
  const logTokens = log.filter((r) => r.strategy !== 'row-lock' || r.status === 'RELEASED').map((r) => Number(r.fencing_token));
  const duplicateTokens = Math.max(auditTokens.length - new Set(auditTokens).size, logTokens.length - new Set(logTokens).size);
  return {
    key,
    sections: audit.length,
    holds: beliefs.filter((b) => b.key === key).length,
    overlaps,
    lostUpdates: audit.length - Number(counter?.value ?? 0),
    sameValueRead,
    tokenOrder,
    duplicateTokens,
    logOverlaps: logOverlapCount(log),
    beliefOverlaps: beliefOverlapCount(beliefs.filter((b) => b.key === key)),
  };
}

async function logRows(conn: mysql.Connection, key: string): Promise<Row[]> {
  return rows(
    conn,
    `SELECT fencing_token, status, strategy, DATE_FORMAT(acquired_at, '%Y-%m-%d %H:%i:%s.%f') AS acquired_at, ` +
      `DATE_FORMAT(ended_at, '%Y-%m-%d %H:%i:%s.%f') AS ended_at FROM db_lock_log WHERE lock_key = ? ORDER BY fencing_token, id`,
    [Buffer.from(key)],
  );
}

/** By token order, a grant must come after the previous holder's row ended (server clock). */
function logOverlapCount(log: readonly Row[]): number {
  let overlaps = 0;
  for (let i = 1; i < log.length; i++) {
    const previousEnd = log[i - 1]!.ended_at;
    if (previousEnd === null || String(log[i]!.acquired_at) < String(previousEnd)) overlaps++;
  }
  return overlaps;
}

function beliefOverlapCount(beliefs: readonly Belief[]): number {
  const sorted = [...beliefs].sort((a, b) => a.from - b.from);
  let overlaps = 0;
  let lastTo = -Infinity;
  for (const belief of sorted) {
    if (belief.from < lastTo) overlaps++;
    lastTo = Math.max(lastTo, belief.to);
  }
  return overlaps;
}

/** Log rows still live (ACQUIRED or COMPLETED) in the whole database. */
export async function liveRows(conn: mysql.Connection): Promise<Row[]> {
  return rows(conn, `SELECT id, lock_key, status, fencing_token, owner, holder FROM db_lock_log WHERE status IN ('ACQUIRED', 'COMPLETED')`);
}

export function violationsOf(verdict: KeyVerdict): number {
  return (
    verdict.overlaps +
    Math.abs(verdict.lostUpdates) +
    verdict.sameValueRead +
    verdict.tokenOrder +
    verdict.duplicateTokens +
    verdict.beliefOverlaps
  );
}
