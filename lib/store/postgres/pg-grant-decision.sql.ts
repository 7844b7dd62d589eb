import { PERMIT_MODE } from '../../core/lock-mode.js';
import { LockStatus } from '../../core/lock-status.js';
import type { PgGrantInput } from './pg-grant.sql.js';
import {
  EFFECTIVE_EXPIRY,
  keyLiteral,
  LIVE_STATUSES_SQL,
  LOCK_LOG_TABLE,
  LOCK_TABLE,
  NOW,
  PROCESS_TABLE,
  rowIdLiteral,
  sqlInteger,
  textLiteral,
} from './pg-sql.js';

/**
 * The lease grant's statements that run on every grant, prepared once per connection of the
 * library's pool (see PgLockPool's `prepared`) and run with EXECUTE in the grant's batch: planned
 * from its text on every grant, the decision cost more than its execution. Their parameters carry
 * every value, so one text serves every shape of request (one key or several, any modes).
 */

/** A custom setting, transaction-local: how many key rows this transaction's lock statement locked. */
const LOCKED_ROWS = 'nestjs_db_lock.locked_rows';

/**
 * Locks the keys' rows in key order and notes how many it locked (LOCKED_ROWS): the decision grants
 * only when that is every key. A row another grant inserted but had not committed yet is not seen
 * here, and not locked, yet may be committed by the time the decision reads (a fresh snapshot): the
 * decision must not trust its own count of key rows. Answers the server's clock (after the wait: the
 * lease then counts from a later time, never an earlier one).
 */
const LOCK_ROWS =
  `PREPARE db_lock_lock_rows(bytea[]) AS SELECT set_config('${LOCKED_ROWS}', count(*)::text, true) AS locked, ${NOW} AS t0 ` +
  `FROM (SELECT 1 FROM ${LOCK_TABLE} WHERE lock_key = ANY($1) ORDER BY lock_key FOR UPDATE) AS l`;

/**
 * A custom setting, transaction-local: 'true' when the key's doorbell was taken or queued for by
 * another session (see turnCheck): a waiter queued first has the next turn.
 */
const QUEUED_SETTING = 'nestjs_db_lock.queued';
const QUEUED = `COALESCE(NULLIF(current_setting('${QUEUED_SETTING}', true), ''), 'false')::boolean`;

/** How long after the key's newest claim ended a doorbell held by another session keeps the turn (see turnCheck). */
const BELL_TURN_MS = 2_000;

/** A log row `c` that claimed its key's token (the claim index's rows: not a row-lock hold's audit row). */
const CLAIMS_TOKEN = `NOT (c.strategy = 'row-lock' AND c.status <> 'CLAIMED')`;

/** The key rows this transaction locked (see LOCK_ROWS); 0 if it locked none. */
const LOCKED = `COALESCE(NULLIF(current_setting('${LOCKED_ROWS}', true), ''), '0')::int`;

/** The live holders of the keys of `t` they conflict with (a CTE named `live`: each one's mode and full lease end `until`). */
const LIVE =
  `live AS (SELECT g.mode, ${EFFECTIVE_EXPIRY} AS until FROM t JOIN ${LOCK_LOG_TABLE} g ON g.lock_key = t.k ` +
  `LEFT JOIN ${PROCESS_TABLE} p ON p.id = g.process_id WHERE g.status IN ${LIVE_STATUSES_SQL} AND (t.m <> 'read' OR g.mode <> 'read'))`;

/**
 * The server's clock once per decision (a CTE is evaluated once): one grant's rows share their
 * times, as on MySQL, where `clock_timestamp()` per row would date each as it is written.
 */
const CLOCK = `clock AS (SELECT ${NOW} AS now)`;

/** The granted rows, one per key of `bumped` with its new token: parameters $3 lease ms, $4 owner, $5 holder, $6 process, $7 waited ms. */
const INSERT_HOLDERS =
  `ins AS (INSERT INTO ${LOCK_LOG_TABLE} (lock_key, mode, owner, holder, process_id, strategy, fencing_token, status, lease_ms, acquired_at, expires_at, wait_ms) ` +
  `SELECT lock_key, m, $4, $5, $6, 'lease', fencing_token, '${LockStatus.ACQUIRED}', $3, c.now, c.now + $3 * interval '1 millisecond', $7 ` +
  `FROM bumped CROSS JOIN clock c RETURNING id, lock_key, fencing_token, acquired_at, expires_at)`;

/** One row per granted key, or one summary row when nothing was granted (the summary on each). */
const answer = (extra: string): string =>
  `SELECT ok.granted, d.locked_rows, d.queued, d.writer_waiting, d.busy, d.expired, ${extra}, ins.id, ins.lock_key, ins.fencing_token, ins.acquired_at, ins.expires_at ` +
  `FROM d CROSS JOIN ok LEFT JOIN ins ON true`;

/**
 * A lock's decision and writes (see grantBatch), in one statement: $1 keys, $2 their modes, $8 the
 * writer-waiting mark in ms (0: none), $9 writer preference. Granted when every key row is there
 * and locked by this transaction (LOCK_ROWS), no conflicting holder is live (expired ones too: they are taken over first), and (writer
 * preference) no waiting writer marked a key read here, and (a turn check ran) no doorbell waiter came first. Then each key's token is bumped (a writer's
 * mark cleared) and its row inserted; if refused, a waiting writer marks its keys, refreshed only
 * when less than half of the mark is left.
 */
const LOCK_DECISION =
  `PREPARE db_lock_grant(bytea[], text[], int, text, text, bigint, int, int, boolean) AS ` +
  `WITH t AS (SELECT * FROM unnest($1, $2) AS t(k, m)), ${CLOCK}, ${LIVE}, ` +
  `d AS (SELECT ${LOCKED} AS locked_rows, ${QUEUED} AS queued, ` +
  `(CASE WHEN $9 THEN (SELECT count(*) FROM t JOIN ${LOCK_TABLE} l ON l.lock_key = t.k WHERE t.m = 'read' AND l.writer_waiting_until > ${NOW}) ELSE 0 END)::int AS writer_waiting, ` +
  `(SELECT count(*) FROM live WHERE until > ${NOW})::int AS busy, (SELECT count(*) FROM live WHERE until <= ${NOW})::int AS expired), ` +
  `ok AS (SELECT locked_rows = cardinality($1) AND NOT queued AND writer_waiting = 0 AND busy + expired = 0 AS granted FROM d), ` +
  `bumped AS (UPDATE ${LOCK_TABLE} l SET fencing_token = l.fencing_token + 1, last_granted_at = ${NOW}, no_lease_holders = 0, ` +
  `writer_waiting_until = CASE WHEN t.m = 'write' THEN NULL ELSE l.writer_waiting_until END ` +
  `FROM t WHERE l.lock_key = t.k AND (SELECT granted FROM ok) RETURNING l.lock_key, l.fencing_token, t.m), ${INSERT_HOLDERS}, ` +
  `mark AS (UPDATE ${LOCK_TABLE} l SET writer_waiting_until = ${NOW} + $8 * interval '1 millisecond' FROM t ` +
  `WHERE $8 > 0 AND t.m = 'write' AND l.lock_key = t.k AND NOT (SELECT granted FROM ok) ` +
  `AND (l.writer_waiting_until IS NULL OR l.writer_waiting_until < ${NOW} + $8 * interval '0.5 millisecond')) ` +
  answer('NULL::int AS current_limit, 0 AS locked');

/**
 * A semaphore permit's decision and writes: $1 the key, $2 the limit, $8 writer preference. At most
 * `limit` live permits, no lock holder, no waiting writer (permits are readers to writers), and the
 * limit the live permits are in use with (a new one is adopted only when none is live).
 */
const PERMIT_DECISION =
  `PREPARE db_lock_permit(bytea, int, int, text, text, bigint, int, boolean) AS ` +
  `WITH t AS (SELECT $1 AS k, '${PERMIT_MODE}'::text AS m), ${CLOCK}, ${LIVE}, ` +
  `kr AS (SELECT l.semaphore_limit, ($8 AND l.writer_waiting_until > ${NOW}) AS waits FROM ${LOCK_TABLE} l WHERE l.lock_key = $1), ` +
  `d AS (SELECT ${LOCKED} AS locked_rows, false AS queued, (SELECT count(*) FROM kr WHERE waits)::int AS writer_waiting, ` +
  `(SELECT max(semaphore_limit) FROM kr) AS current_limit, (SELECT count(*) FROM live)::int AS held, ` +
  `(SELECT count(*) FROM live WHERE mode <> '${PERMIT_MODE}')::int AS locked, ` +
  `(SELECT count(*) FROM live WHERE until > ${NOW})::int AS busy, (SELECT count(*) FROM live WHERE until <= ${NOW})::int AS expired), ` +
  `ok AS (SELECT locked_rows = 1 AND writer_waiting = 0 AND locked = 0 AND held < $2 AND (held = 0 OR current_limit IS NULL OR current_limit = $2) AS granted FROM d), ` +
  `bumped AS (UPDATE ${LOCK_TABLE} l SET fencing_token = l.fencing_token + 1, last_granted_at = ${NOW}, no_lease_holders = 0, semaphore_limit = $2 ` +
  `FROM t WHERE l.lock_key = t.k AND (SELECT granted FROM ok) RETURNING l.lock_key, l.fencing_token, t.m), ${INSERT_HOLDERS} ` +
  answer('d.current_limit, d.locked');

/**
 * What a connection runs once before its first grant: its prepared statements dropped (a batch that
 * prepared them and then failed left them in place, and PREPARE refuses a name in use), then made.
 */
export const GRANT_STATEMENTS = { sql: ['DEALLOCATE ALL', LOCK_ROWS, LOCK_DECISION, PERMIT_DECISION].join(';\n'), count: 4 };

const keyArray = (keys: readonly Buffer[]): string => `ARRAY[${keys.map(keyLiteral).join(', ')}]`;

/**
 * The turn check of a grant not sent through the key's doorbell (`bell`, see pg-doorbells.ts):
 * refused (QUEUED) while another session has the bell or waits for it. A shared try of the bell's
 * advisory lock fails then (PostgreSQL queues a request behind conflicting waiters, and a try does
 * not wait); when it succeeds it is kept until the grant commits, a few statements later. The turn
 * lasts BELL_TURN_MS past the end of the key's newest claim: the waiter a ring woke grants within
 * milliseconds, so a bell kept longer over a free key belongs to a waiter that stopped (a frozen
 * process, a host cut off with its connection open), and must not keep everyone from the key.
 */
export const turnCheck = (bell: string, key: Buffer): string =>
  `SELECT set_config('${QUEUED_SETTING}', (CASE WHEN pg_try_advisory_xact_lock_shared(${bell}) THEN false ELSE ` +
  `COALESCE((SELECT c.ended_at FROM ${LOCK_LOG_TABLE} c WHERE c.lock_key = ${keyLiteral(key)} AND ${CLAIMS_TOKEN} ORDER BY c.fencing_token DESC LIMIT 1), '-infinity') ` +
  `>= ${NOW} - interval '${BELL_TURN_MS} milliseconds' END)::text, true)`;

/** The key rows' lock, in key order. */
export const lockRows = (keys: readonly Buffer[]): string => `EXECUTE db_lock_lock_rows(${keyArray(keys)})`;

/** The arguments every decision shares: lease ms, owner, holder, process, waited ms. */
function holderArguments(input: PgGrantInput): string {
  const { request } = input;
  return `${sqlInteger(request.leaseMs)}, ${textLiteral(request.acquisitionId)}, ${textLiteral(input.holder)}, ${rowIdLiteral(input.processId)}, ${sqlInteger(request.waitedMs)}`;
}

export function lockDecision(input: PgGrantInput): string {
  const { targets, writerPreference, writerWaitMarkMs } = input.request;
  const modes = `ARRAY[${targets.map((t) => `'${t.mode}'`).join(', ')}]::text[]`;
  return `EXECUTE db_lock_grant(${keyArray(targets.map((t) => t.bytes))}, ${modes}, ${holderArguments(input)}, ${sqlInteger(writerWaitMarkMs)}, ${writerPreference})`;
}

export function permitDecision(input: PgGrantInput, limit: number): string {
  return `EXECUTE db_lock_permit(${keyLiteral(input.request.targets[0]!.bytes)}, ${sqlInteger(limit)}, ${holderArguments(input)}, ${input.request.writerPreference})`;
}
