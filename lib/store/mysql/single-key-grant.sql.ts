import type { GrantInput, GrantOutcome } from './grant.sql.js';
import { bound } from './grant-statements.sql.js';
import {
  LEASE_GRANTED,
  affectedRowsOf,
  escape,
  format,
  sharedKeyLiteral,
  LIVE_STATUSES_SQL,
  LOCK_LOG_TABLE,
  LOCK_TABLE,
  LockStatus,
  nextTokenSql,
  currentTokenSql,
  EVALUATED_NOW,
  NOW,
  ourTurnSql,
  parseDate,
  rowsOf,
} from './sql.js';
import type { StatementPlan } from './statement-plan.js';

/**
 * The grant of one key at the shape of its physical floor: one transaction that writes the key's
 * counter and the audit row and commits, with no locking read or count before the decision.
 *  1. One conditional UPDATE of the key's row decides and writes. InnoDB locks the row by its
 *     primary key before it evaluates the WHERE (an exact primary-key search never takes the
 *     semi-consistent shortcut), and the NOT EXISTS is tied to that row, so its READ COMMITTED
 *     view is made after the lock: a grant that held the row has committed its log row by then.
 *     A matched row always changes (the token grows), so the decision reads the same with
 *     CLIENT_FOUND_ROWS on or off. LAST_INSERT_ID(token) puts the token in the OK packet. The
 *     key repeated as a constant lets the subquery range-scan (lock_key, status) instead of the
 *     global status index, whose not yet purged entries of ended rows it would walk.
 *  2. The log row, only if the UPDATE matched (ROW_COUNT() is the previous statement's); its id
 *     is the OK packet's insert id.
 *  3. If refused (nothing inserted), why, from the key row and its live log rows in one join (no
 *     row if the key row is missing); no row at all when granted, and a refused try is still one
 *     round trip. (Four scalar subqueries here, even unevaluated, cost every grant about 0.15 ms.)
 *  4. A waiting writer refused marks the key (writer preference), only then: no row of this
 *     acquisition at LAST_INSERT_ID() (after a refusal it is an earlier grant's).
 *  5. The lease end as the row holds it, by primary key (the one value no OK packet carries).
 */
/**
 * Step 1 of every single-key grant: the conditional UPDATE of the key's row that decides and
 * writes (see singleKeyGrantPlan). With `freeAtToken` (see KnownFreeKeys) the key's own token
 * stands in for the log search: still that token means no grant since a release known to be
 * durable, hence no live holder.
 */
export function decisionUpdate(input: GrantInput, freeAtToken?: number): string {
  // Built by hand, not by format(): this is the per-acquisition hot path, and every value is a key
  // literal, a number or a doorbell name escaped here.
  const target = input.targets[0]!;
  const write = target.mode === 'write';
  const key = sharedKeyLiteral(target.bytes);
  let conditions = '';
  if (!write && input.writerPreference) conditions += ` AND (writer_waiting_until IS NULL OR writer_waiting_until <= ${NOW})`;
  // While another session holds the key's doorbell, a waiter queued first has the next turn.
  if (input.doorbell) conditions += ` AND ${ourTurnSql(input.doorbell, input.claims === true ? key : undefined)}`;
  // A reader waits for writers and for a semaphore's permits (a key is a lock or a semaphore, never both at once).
  const free =
    freeAtToken === undefined
      ? `NOT EXISTS (SELECT 1 FROM ${LOCK_LOG_TABLE} g WHERE g.lock_key = ${key} AND g.status IN ${LIVE_STATUSES_SQL}${write ? '' : ` AND g.mode <> 'read'`} AND g.lock_key = ${LOCK_TABLE}.lock_key)`
      : // Claim-aware: a one-INSERT grant (our own, or a writer's after a doorbell wait) claims its token in the log and leaves the key row behind.
        `${currentTokenSql(`${LOCK_TABLE}.lock_key`, input.claims === true)} = ${Number(freeAtToken)}`;
  return (
    `UPDATE ${LOCK_TABLE} SET fencing_token = LAST_INSERT_ID(${nextTokenSql(`${LOCK_TABLE}.lock_key`, input.claims === true)}), last_granted_at = ${NOW}, ${LEASE_GRANTED}${write ? ', writer_waiting_until = NULL' : ''} ` +
    `WHERE lock_key = ${key} AND ${free}${conditions}`
  );
}

/**
 * When a grant row's interval begins: `evaluated` (the default) when its values are evaluated, after
 * a wait inside its statement (see EVALUATED_NOW); `statement-start` for a statement that cannot
 * grant after waiting for a release (the claim of a key known free: see claimingGrantPlan).
 */
export type GrantDating = 'evaluated' | 'statement-start';

/** The log row's columns and values for a single-key grant, its token given as an SQL expression. */
export function logRowValues(input: GrantInput, token: string, dating: GrantDating = 'evaluated'): { columns: string; values: string } {
  const target = input.targets[0]!;
  // Mode and strategy come from closed sets, validated before any SQL.
  return {
    columns: LOG_ROW_COLUMNS,
    values:
      `${sharedKeyLiteral(target.bytes)}, '${target.mode}', ${escape(input.acquisitionId)}, ${processValues(input.holder, input.processId)}, ` +
      `'${input.strategy}', ${token}, ${leaseValues(Number(input.leaseMs), dating)}, ${Math.round(input.waitedMs)}`,
  };
}

const LOG_ROW_COLUMNS = 'lock_key, mode, owner, holder, process_id, strategy, fencing_token, status, lease_ms, acquired_at, expires_at, wait_ms';

/*
 * Parts of the log row that repeat from grant to grant, built once: every grant builds its statement
 * on the caller's critical path, on a CPU whose caches the wait for the previous answer left cold.
 */

let lastProcess = { holder: '', processId: '', sql: '' };
/** The holder and process id escaped: the same on every row a process writes. */
function processValues(holder: string, processId: string): string {
  if (holder !== lastProcess.holder || processId !== lastProcess.processId)
    lastProcess = { holder, processId, sql: `${escape(holder)}, ${escape(processId)}` };
  return lastProcess.sql;
}

const lastLease: Record<GrantDating, { leaseMs: number; sql: string }> = {
  evaluated: { leaseMs: NaN, sql: '' },
  'statement-start': { leaseMs: NaN, sql: '' },
};
/** Status, lease and the lease end as SQL: the same for every grant with the same lease. */
function leaseValues(leaseMs: number, dating: GrantDating): string {
  const last = lastLease[dating];
  if (leaseMs === last.leaseMs) return last.sql;
  // The evaluated clock costs the server a few percent of the claim's INSERT: only where it matters.
  const now = dating === 'evaluated' ? EVALUATED_NOW : NOW;
  lastLease[dating] = { leaseMs, sql: `'${LockStatus.ACQUIRED}', ${leaseMs}, ${now}, ${now} + INTERVAL ${leaseMs * 1000} MICROSECOND` };
  return lastLease[dating].sql;
}

export function singleKeyGrantPlan(input: GrantInput): StatementPlan<GrantOutcome> {
  const target = input.targets[0]!;
  const write = target.mode === 'write';
  const writerWaiting = !write && input.writerPreference ? `k.writer_waiting_until > ${NOW}` : 'FALSE';
  const decision = decisionUpdate(input);
  const row = logRowValues(input, 'LAST_INSERT_ID()');
  const statements = bound(input, [
    'START TRANSACTION',
    decision,
    `INSERT INTO ${LOCK_LOG_TABLE} (${row.columns}) SELECT ${row.values} FROM DUAL WHERE ROW_COUNT() = 1`,
    format(
      `SELECT ${writerWaiting} AS writer_waiting, COALESCE(SUM(g.expires_at > ${NOW}), 0) AS busy, ` +
        `COALESCE(SUM(g.expires_at <= ${NOW}), 0) AS expired ` +
        `FROM ${LOCK_TABLE} k LEFT JOIN ${LOCK_LOG_TABLE} g ON g.lock_key = k.lock_key AND g.status IN ${LIVE_STATUSES_SQL}${write ? '' : ` AND g.mode <> 'read'`} ` +
        `WHERE k.lock_key = ? AND ROW_COUNT() = 0 GROUP BY k.lock_key`,
      [target.bytes],
    ),
    ...(write && input.writerWaitMarkMs > 0
      ? [
          format(
            `UPDATE ${LOCK_TABLE} SET writer_waiting_until = ${NOW} + INTERVAL ? MICROSECOND WHERE lock_key = ? ` +
              `AND NOT EXISTS (SELECT 1 FROM ${LOCK_LOG_TABLE} WHERE id = LAST_INSERT_ID() AND owner = ?) ` +
              `AND (writer_waiting_until IS NULL OR writer_waiting_until < ${NOW} + INTERVAL ? MICROSECOND)`,
            [input.writerWaitMarkMs * 1000, target.bytes, input.acquisitionId, input.writerWaitMarkMs * 500],
          ),
        ]
      : []),
    `SELECT expires_at FROM ${LOCK_LOG_TABLE} WHERE id = LAST_INSERT_ID()`,
    'COMMIT',
  ]);
  const expiresAt = statements.length - 2;
  return {
    statements,
    parse: (results) => {
      const decided = results[1] as { insertId?: number | string } | undefined;
      const logged = results[2] as { insertId?: number | string } | undefined;
      if (affectedRowsOf(decided) === 1 && affectedRowsOf(logged) === 1)
        return {
          granted: true,
          rows: [
            {
              id: String(logged!.insertId),
              storedKey: target.storedKey,
              fencingToken: Number(decided!.insertId),
              expiresAt: parseDate(rowsOf(results[expiresAt])[0]?.expires_at),
            },
          ],
          reclaimed: 0,
          serverWaitMs: 0,
        };
      // Why, as of the reading (without the lock the UPDATE gave back): the full plans judge again under it.
      const row = rowsOf(results[3])[0];
      if (row === undefined) return { granted: false, reason: 'missing-key-rows' };
      if (Number(row.busy) > 0) return { granted: false, reason: 'busy' };
      if (Number(row.writer_waiting) > 0) return { granted: false, reason: 'writer-waiting' };
      if (Number(row.expired) > 0) return { granted: false, reason: 'expired-holders' };
      return { granted: false, reason: 'busy' };
    },
  };
}
