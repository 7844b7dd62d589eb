import type pg from 'pg';
import type { LockTarget } from '../../core/lock-key.js';
import type { GrantOutcome, GrantRequest } from '../lock-store.js';
import { createKeyRowsStatement } from './pg-log-rows.sql.js';
import {
  EFFECTIVE_EXPIRY,
  endHoldersCtes,
  keyList,
  keyLiteral,
  keyText,
  LIVE_STATUSES_SQL,
  LOCK_LOG_TABLE,
  LOCK_TABLE,
  LockStatus,
  msInterval,
  NOW,
  parseDate,
  PROCESS_TABLE,
  rowIdLiteral,
  sqlInteger,
  textLiteral,
  type Row,
} from './pg-sql.js';

/** The log rows' mode of a semaphore's permits (locks write 'read' or 'write'), as on MySQL. */
export const PERMIT_MODE = 'permit';

/** A lease grant as this store sends it: the strategy's request and the granting process. */
export interface PgGrantInput {
  readonly request: GrantRequest;
  /** host:pid of the granting process. */
  readonly holder: string;
  /** Its process-lease row. */
  readonly processId: string;
  /** lock_timeout of the grant's row-lock waits, in ms (a row-lock holder keeps a key row for its whole transaction). */
  readonly waitMs: number;
}

/** What a grant batch has to do besides deciding: first use of a key, holders whose lease ran out. */
export interface GrantSteps {
  readonly createKeyRows: boolean;
  readonly takeover: boolean;
}

/**
 * One lease grant try, one round trip: a simple-query batch holding one READ COMMITTED transaction.
 *  1. note the server's clock (the lease's start is measured from it) and bound the lock waits;
 *  2. (first use) create the missing key rows, from the fencing floor;
 *  3. lock the keys' rows in key order: every grant of a key, and every row-lock take, serialises here;
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
 * only the process, so a long hold's own expires_at runs out while it is held.
 */
export function grantBatch(input: PgGrantInput, steps: GrantSteps): { sql: string; parse: (results: pg.QueryResult[]) => GrantOutcome } {
  const { targets } = input.request;
  const keys = targets.map((t) => t.bytes);
  const limit = targets.length === 1 ? targets[0]!.semaphoreLimit : undefined;
  const conflict = limit === undefined ? conflictingHolders(targets) : `g.lock_key = ${keyLiteral(keys[0]!)}`;
  const statements = [
    'BEGIN ISOLATION LEVEL READ COMMITTED',
    `SELECT ${NOW} AS t0, set_config('lock_timeout', '${Math.max(1, Math.ceil(input.waitMs))}ms', true)`,
    ...(steps.createKeyRows ? [createKeyRowsStatement(keys)] : []),
    `SELECT lock_key FROM ${LOCK_TABLE} WHERE lock_key IN (${keyList(keys)}) ORDER BY lock_key FOR UPDATE`,
    ...(steps.takeover ? takeoverStatements(conflict, `taken over by ${input.request.acquisitionId}`) : []),
    limit === undefined ? lockDecision(input) : permitDecision(input, limit),
    'COMMIT',
  ];
  const decided = statements.length - 2;
  return {
    sql: statements.join(';\n'),
    parse: (results) => {
      const t0 = parseDate((results[1]!.rows[0] as Row).t0);
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

/** The live holders matching `conflict` (a CTE named `live`: each one's full lease end as `until`, and its mode). */
function liveHolders(conflict: string): string {
  return (
    `live AS (SELECT g.mode, ${EFFECTIVE_EXPIRY} AS until FROM ${LOCK_LOG_TABLE} g LEFT JOIN ${PROCESS_TABLE} p ON p.id = g.process_id ` +
    `WHERE ${conflict} AND g.status IN ${LIVE_STATUSES_SQL})`
  );
}

/** A lock's decision and writes (see grantBatch, step 5). */
function lockDecision(input: PgGrantInput): string {
  const { targets, writerPreference, writerWaitMarkMs } = input.request;
  const readKeys = targets.filter((t) => t.mode === 'read').map((t) => t.bytes);
  const writeKeys = targets.filter((t) => t.mode === 'write').map((t) => t.bytes);
  const writerWaiting =
    writerPreference && readKeys.length > 0
      ? `(SELECT count(*) FROM ${LOCK_TABLE} l WHERE l.lock_key IN (${keyList(readKeys)}) AND l.writer_waiting_until > ${NOW})::int`
      : '0';
  const clearMark = writeKeys.length > 0 ? `, writer_waiting_until = CASE WHEN t.m = 'write' THEN NULL ELSE l.writer_waiting_until END` : '';
  return (
    `WITH t(k, m) AS (VALUES ${targets.map((t) => `(${keyLiteral(t.bytes)}, '${t.mode}')`).join(', ')}), ` +
    `${liveHolders(conflictingHolders(targets))}, ` +
    `d AS (SELECT (SELECT count(*) FROM ${LOCK_TABLE} l WHERE l.lock_key IN (SELECT k FROM t))::int AS key_rows, ${writerWaiting} AS writer_waiting, ` +
    `(SELECT count(*) FROM live WHERE until > ${NOW})::int AS busy, (SELECT count(*) FROM live WHERE until <= ${NOW})::int AS expired), ` +
    `ok AS (SELECT key_rows = ${targets.length} AND writer_waiting = 0 AND busy + expired = 0 AS granted FROM d), ` +
    `bumped AS (UPDATE ${LOCK_TABLE} l SET fencing_token = l.fencing_token + 1, last_granted_at = ${NOW}, no_lease_holders = 0${clearMark} ` +
    `FROM t WHERE l.lock_key = t.k AND (SELECT granted FROM ok) RETURNING l.lock_key, l.fencing_token, t.m), ` +
    `${insertHolders(input)}` +
    (writerWaitMarkMs > 0 && writeKeys.length > 0 ? `, ${writerMark(writeKeys, writerWaitMarkMs)}` : '') +
    ` ${answer('NULL::int AS current_limit')}`
  );
}

/**
 * A semaphore permit's decision and writes (see grantBatch, step 5): at most `limit` live permits,
 * no lock holder, no waiting writer (permits are readers to writers), and the limit the live
 * permits are in use with (a new limit is adopted only when none is live).
 */
function permitDecision(input: PgGrantInput, limit: number): string {
  const key = keyLiteral(input.request.targets[0]!.bytes);
  const waits = input.request.writerPreference ? `l.writer_waiting_until > ${NOW}` : 'false';
  return (
    `WITH t(k, m) AS (VALUES (${key}, '${PERMIT_MODE}')), ${liveHolders(`g.lock_key = ${key}`)}, ` +
    `kr AS (SELECT l.semaphore_limit, ${waits} AS waits FROM ${LOCK_TABLE} l WHERE l.lock_key = ${key}), ` +
    `d AS (SELECT (SELECT count(*) FROM kr)::int AS key_rows, (SELECT count(*) FROM kr WHERE waits)::int AS writer_waiting, ` +
    `(SELECT max(semaphore_limit) FROM kr) AS current_limit, (SELECT count(*) FROM live)::int AS held, ` +
    `(SELECT count(*) FROM live WHERE mode <> '${PERMIT_MODE}')::int AS locked, ` +
    `(SELECT count(*) FROM live WHERE until > ${NOW})::int AS busy, (SELECT count(*) FROM live WHERE until <= ${NOW})::int AS expired), ` +
    `ok AS (SELECT key_rows = 1 AND writer_waiting = 0 AND locked = 0 AND held < ${sqlInteger(limit)} ` +
    `AND (held = 0 OR current_limit IS NULL OR current_limit = ${sqlInteger(limit)}) AS granted FROM d), ` +
    `bumped AS (UPDATE ${LOCK_TABLE} l SET fencing_token = l.fencing_token + 1, last_granted_at = ${NOW}, no_lease_holders = 0, ` +
    `semaphore_limit = ${sqlInteger(limit)} FROM t WHERE l.lock_key = t.k AND (SELECT granted FROM ok) RETURNING l.lock_key, l.fencing_token, t.m), ` +
    `${insertHolders(input)} ${answer('d.current_limit, d.locked')}`
  );
}

/** The granted rows: one per key of `bumped`, with its new token (CTE `ins`). */
function insertHolders(input: PgGrantInput): string {
  const { request } = input;
  return (
    `ins AS (INSERT INTO ${LOCK_LOG_TABLE} (lock_key, mode, owner, holder, process_id, strategy, fencing_token, status, lease_ms, acquired_at, expires_at, wait_ms) ` +
    `SELECT lock_key, m, ${textLiteral(request.acquisitionId)}, ${textLiteral(input.holder)}, ${rowIdLiteral(input.processId)}, 'lease', fencing_token, ` +
    `'${LockStatus.ACQUIRED}', ${sqlInteger(request.leaseMs)}, ${NOW}, ${NOW} + ${msInterval(sqlInteger(request.leaseMs))}, ${sqlInteger(request.waitedMs)} ` +
    `FROM bumped RETURNING id, lock_key, fencing_token, acquired_at, expires_at)`
  );
}

/** A waiting writer holds back new readers (writer preference); refreshed only when less than half of the mark is left. */
function writerMark(writeKeys: readonly Buffer[], markMs: number): string {
  return (
    `mark AS (UPDATE ${LOCK_TABLE} l SET writer_waiting_until = ${NOW} + ${msInterval(sqlInteger(markMs))} ` +
    `WHERE l.lock_key IN (${keyList(writeKeys)}) AND NOT (SELECT granted FROM ok) ` +
    `AND (l.writer_waiting_until IS NULL OR l.writer_waiting_until < ${NOW} + ${msInterval(sqlInteger(markMs / 2))}))`
  );
}

/** One row per granted key, or one summary row when nothing was granted (the summary on each). */
function answer(extra: string): string {
  return (
    `SELECT ok.granted, d.key_rows, d.writer_waiting, d.busy, d.expired, ${extra}, ins.id, ins.lock_key, ins.fencing_token, ins.acquired_at, ins.expires_at ` +
    `FROM d CROSS JOIN ok LEFT JOIN ins ON true`
  );
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
      serverWaitMs: Math.max(0, parseDate(rows[0]!.acquired_at).getTime() - t0.getTime()),
      serverStartedAt: t0,
    };
  }
  if (Number(summary.key_rows) < n) return { granted: false, reason: 'missing-key-rows' };
  const current = summary.current_limit === null || summary.current_limit === undefined ? null : Number(summary.current_limit);
  // A different limit is refused only while unexpired permits hold it; expired ones are taken over first.
  if (limit !== undefined && Number(summary.locked) === 0 && current !== null && current !== limit && Number(summary.busy) > 0)
    return { granted: false, reason: 'limit-mismatch', currentLimit: current };
  if (Number(summary.busy) > 0) return { granted: false, reason: 'busy' };
  if (Number(summary.writer_waiting) > 0) return { granted: false, reason: 'writer-waiting' };
  if (Number(summary.expired) > 0) return { granted: false, reason: 'expired-holders' };
  return { granted: false, reason: 'busy' };
}
