import type pg from 'pg';
import type { LockTarget } from '../../core/lock-key.js';
import type { GrantOutcome, GrantRequest } from '../lock-store.js';
import { createKeyRowsStatement } from './pg-log-rows.sql.js';
import { knownFreeGrantBatch } from './pg-known-free-grant.sql.js';
import { lockDecision, lockRows, permitDecision, turnCheck } from './pg-grant-decision.sql.js';
import {
  EFFECTIVE_EXPIRY,
  endHoldersCtes,
  keyList,
  keyLiteral,
  keyText,
  LIVE_STATUSES_SQL,
  LOCK_LOG_TABLE,
  LockStatus,
  grantWaitBound,
  NOW,
  parseDate,
  PROCESS_TABLE,
  type Row,
} from './pg-sql.js';

/** A lease grant as this store sends it: the strategy's request and the granting process. */
export interface PgGrantInput {
  readonly request: GrantRequest;
  /** host:pid of the granting process. */
  readonly holder: string;
  /** Its process-lease row. */
  readonly processId: string;
  /** lock_timeout of the grant's row-lock waits, in ms (a row-lock holder keeps a key row for its whole transaction). */
  readonly waitMs: number;
  /** The key's doorbell (an advisory lock's key), when the grant is not sent through it: see turnCheck. */
  readonly turn?: string;
}

/** What a grant batch has to do besides deciding: first use of a key, holders whose lease ran out. */
export interface GrantSteps {
  readonly createKeyRows: boolean;
  readonly takeover: boolean;
  /** The token at which this process knows the key free: the one-statement grant instead (knownFreeGrantBatch). */
  readonly knownFreeAt?: number;
}

/**
 * One lease grant try, one round trip: a simple-query batch holding one READ COMMITTED transaction.
 *  1. (a budget under LOCK_WAIT_MS) bound the lock waits to it;
 *  2. (first use) create the missing key rows, from the fencing floor;
 *  3. (a doorbell's key, not sent through it) the turn check: a doorbell waiter queued first goes first;
 *     then lock the keys' rows in key order (every grant of a key, and every row-lock take, serialises
 *     here) and note the server's clock;
 *  4. (takeover) lock the processes of the conflicting holders FOR SHARE, so that a renewal in
 *     flight commits first and the next statement sees it; end the holders whose lease (own or
 *     process) ran out as EXPIRED and tell their processes, which is what fences them;
 *  5. decide and write in one statement, whose snapshot is taken after the locks (READ COMMITTED:
 *     one per statement), so it sees every grant that held the rows before: count the conflicting
 *     live holders, and if none (and no waiting writer holds back a reader, and every key row is
 *     there), bump each key's token, insert one log row per key with it, and answer the rows; if
 *     not, a waiting writer marks its keys. Every grant of a key needs step 3's lock, so no holder
 *     appears between the count and the insert.
 * Busy and expired are judged by the holders' full leases (own or process): the watchdog renews
 * only the process, so a long hold's own expires_at runs out while it is held. Steps 3 and 5 are
 * prepared statements (pg-grant-decision.sql.ts).
 */
export function grantBatch(input: PgGrantInput, steps: GrantSteps): { sql: string; parse: (results: pg.QueryResult[]) => GrantOutcome } {
  if (steps.knownFreeAt !== undefined) return knownFreeGrantBatch(input, steps.knownFreeAt);
  const { targets } = input.request;
  const keys = targets.map((t) => t.bytes);
  const limit = targets.length === 1 ? targets[0]!.semaphoreLimit : undefined;
  const conflict = limit === undefined ? conflictingHolders(targets) : `g.lock_key = ${keyLiteral(keys[0]!)}`;
  const bound = grantWaitBound(input.waitMs);
  const statements = [
    'BEGIN ISOLATION LEVEL READ COMMITTED',
    ...bound,
    ...(steps.createKeyRows ? [createKeyRowsStatement(keys)] : []),
    ...(input.turn !== undefined ? [turnCheck(input.turn, keys[0]!)] : []),
    lockRows(keys),
    ...(steps.takeover ? takeoverStatements(conflict, `taken over by ${input.request.acquisitionId}`) : []),
    limit === undefined ? lockDecision(input) : permitDecision(input, limit),
    'COMMIT',
  ];
  const decided = statements.length - 2;
  const locked = 1 + bound.length + (steps.createKeyRows ? 1 : 0) + (input.turn !== undefined ? 1 : 0);
  return {
    sql: statements.join(';\n'),
    parse: (results) => {
      // The lock statement answers one row (a count), with the clock read once the rows were locked.
      const t0 = parseDate((results[locked]!.rows[0] as Row).t0);
      const reclaimed = steps.takeover ? Number((results[decided - 1]!.rows[0] as Row | undefined)?.reclaimed ?? 0) : 0;
      return outcomeOf(results[decided]!.rows as Row[], targets.length, t0, reclaimed, limit);
    },
  };
}

/**
 * The condition on a log row `g` that it is a holder the targets conflict with (its status left to
 * the caller): a writer conflicts with every holder of its key, a reader with writers and with a
 * semaphore's permits (a key is a lock or a semaphore, never both at once).
 */
export function conflictingHolders(targets: readonly LockTarget[]): string {
  const writeKeys = targets.filter((t) => t.mode === 'write').map((t) => t.bytes);
  const readKeys = targets.filter((t) => t.mode === 'read').map((t) => t.bytes);
  const parts: string[] = [];
  if (writeKeys.length > 0) parts.push(`g.lock_key IN (${keyList(writeKeys)})`);
  if (readKeys.length > 0) parts.push(`(g.lock_key IN (${keyList(readKeys)}) AND g.mode <> 'read')`);
  return `(${parts.join(' OR ')})`;
}

/**
 * The takeover of live holders matching `conflict` whose full lease ran out (see grantBatch, step
 * 4): their processes locked, then the holders ended and their processes told; answers `reclaimed`.
 * The row-lock's rare path sends the same on the library's pool.
 */
export function takeoverStatements(conflict: string, note: string): string[] {
  const live = `${conflict} AND g.status IN ${LIVE_STATUSES_SQL}`;
  return [
    `SELECT p.id FROM ${PROCESS_TABLE} p WHERE p.id IN (SELECT g.process_id FROM ${LOCK_LOG_TABLE} g WHERE ${live}) ORDER BY p.id FOR SHARE`,
    `WITH due AS (SELECT g.id FROM ${LOCK_LOG_TABLE} g LEFT JOIN ${PROCESS_TABLE} p ON p.id = g.process_id WHERE ${live} AND ${EFFECTIVE_EXPIRY} <= ${NOW}), ` +
      `${endHoldersCtes(LockStatus.EXPIRED, note)} SELECT count(*)::int AS reclaimed FROM ended`,
  ];
}

function outcomeOf(rows: readonly Row[], n: number, t0: Date, reclaimed: number, limit: number | undefined): GrantOutcome {
  const summary = rows[0] ?? {};
  if (summary.granted === true && rows.length === n && rows.every((row) => row.id !== null)) {
    return {
      granted: true,
      rows: rows.map((row) => ({
        id: String(row.id),
        storedKey: keyText(row.lock_key),
        fencingToken: Number(row.fencing_token),
        expiresAt: parseDate(row.expires_at),
      })),
      reclaimed,
      // Counted from when the key rows were locked: from a later time than the lease's start, never an earlier one.
      serverWaitMs: Math.max(0, parseDate(rows[0]!.acquired_at).getTime() - t0.getTime()),
      serverStartedAt: t0,
    };
  }
  // A key row not there, or not locked by this grant (created by another one meanwhile): the next try creates what is missing and locks it.
  if (Number(summary.locked_rows) < n) return { granted: false, reason: 'missing-key-rows' };
  // A doorbell waiter was queued first: its turn (this caller waits on the bell next).
  if (summary.queued === true) return { granted: false, reason: 'busy' };
  const current = summary.current_limit === null || summary.current_limit === undefined ? null : Number(summary.current_limit);
  // A different limit is refused only while unexpired permits hold it; expired ones are taken over first.
  if (limit !== undefined && Number(summary.locked) === 0 && current !== null && current !== limit && Number(summary.busy) > 0)
    return { granted: false, reason: 'limit-mismatch', currentLimit: current };
  // A semaphore's expired permits free a place once taken over, whatever the live ones; a lock's expired holders help only when no live one is left.
  if (limit !== undefined && Number(summary.expired) > 0) return { granted: false, reason: 'expired-holders' };
  if (Number(summary.busy) > 0) return { granted: false, reason: 'busy' };
  if (Number(summary.writer_waiting) > 0) return { granted: false, reason: 'writer-waiting' };
  if (Number(summary.expired) > 0) return { granted: false, reason: 'expired-holders' };
  return { granted: false, reason: 'busy' };
}
