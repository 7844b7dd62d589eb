import { PERMIT_MODE } from '../../core/lock-mode.js';
import type { GrantInput } from './grant.sql.js';
import { bound } from './grant-statements.sql.js';
import {
  EFFECTIVE_EXPIRY,
  LEASE_GRANTED,
  format,
  nextTokenSql,
  LIVE_STATUSES_SQL,
  LOCK_LOG_TABLE,
  LOCK_TABLE,
  PROCESS_TABLE,
  LockStatus,
  NOW,
  parseDate,
  rowsOf,
  endHoldersStatement,
} from './sql.js';
import type { StatementPlan } from './statement-plan.js';
import type { GrantOutcome } from '../lock-store.js';

/**
 * A semaphore's grant: one key, at most `limit` live permits. One transaction:
 *  1. lock the key row (every grant of the key serialises here) and read the limit it is in use
 *     with, and (writer preference) whether a writer refused lately waits for the key: permits are
 *     readers to writers, held back as new readers are, or a stream of overlapping permits would
 *     keep a writer out for good;
 *  2. (takeover only) mark the key's holders whose full lease ran out EXPIRED and tell their
 *     processes, as a lock's takeover does; its locking read waits for a renewal in flight, so
 *     a holder renewed late is skipped;
 *  3. count the live rows after the lock (READ COMMITTED: a fresh view, so it is the recount after
 *     a takeover and sees every grant that held the row before): permits split by their own
 *     leases, and lock holders, which exclude permits; decide: a key row, no lock holder, fewer
 *     permits than the limit, and the same limit unless no permit is live (a new limit is adopted then);
 *  4. if granted: bump the token (LAST_INSERT_ID hands it on), store the limit, insert the log row;
 *  5. read the decision and the row back (never affectedRows: CLIENT_FOUND_ROWS).
 */
export function semaphoreGrantPlan(input: GrantInput, limit: number, takeover: boolean): StatementPlan<GrantOutcome> {
  const key = input.targets[0]!.bytes;
  const note = `taken over by ${input.acquisitionId}`;
  const statements = bound(input, [
    'START TRANSACTION',
    format(
      `SELECT COUNT(*), MAX(semaphore_limit), ${input.writerPreference ? `COALESCE(MAX(writer_waiting_until > ${NOW}), 0)` : '0'}, ${NOW} ` +
        `INTO @dbl_rows, @dbl_limit, @dbl_writer_waits, @dbl_t0 FROM ${LOCK_TABLE} WHERE lock_key = ? FOR UPDATE`,
      [key],
    ),
    ...(takeover
      ? [
          format(endHoldersStatement(LockStatus.EXPIRED, `g.lock_key = ? AND g.status IN ${LIVE_STATUSES_SQL} AND ${EFFECTIVE_EXPIRY} <= ${NOW}`), [
            note,
            key,
          ]),
          format(`SELECT COUNT(*) INTO @dbl_reclaimed FROM ${LOCK_LOG_TABLE} WHERE lock_key = ? AND status = '${LockStatus.EXPIRED}' AND note = ?`, [
            key,
            note,
          ]),
        ]
      : ['SET @dbl_reclaimed = 0']),
    format(
      // Unexpired and expired as takeovers count them: a permit renewed through its process lease is live past its own expires_at.
      `SELECT COUNT(*), COALESCE(SUM(g.mode <> '${PERMIT_MODE}'), 0), COALESCE(SUM(${EFFECTIVE_EXPIRY} > ${NOW}), 0), COALESCE(SUM(${EFFECTIVE_EXPIRY} <= ${NOW}), 0), ` +
        `(@dbl_rows = 1 AND NOT @dbl_writer_waits AND COALESCE(SUM(g.mode <> '${PERMIT_MODE}'), 0) = 0 AND COUNT(*) < ? AND (COUNT(*) = 0 OR @dbl_limit IS NULL OR @dbl_limit = ?)) ` +
        `INTO @dbl_live, @dbl_locked, @dbl_busy, @dbl_expired, @dbl_granted FROM ${LOCK_LOG_TABLE} g LEFT JOIN ${PROCESS_TABLE} p ON p.id = g.process_id ` +
        `WHERE g.lock_key = ? AND g.status IN ${LIVE_STATUSES_SQL}`,
      [limit, limit, key],
    ),
    format(
      `UPDATE ${LOCK_TABLE} SET fencing_token = LAST_INSERT_ID(${nextTokenSql(`${LOCK_TABLE}.lock_key`, input.claims === true)}), last_granted_at = ${NOW}, ${LEASE_GRANTED}, semaphore_limit = ? WHERE lock_key = ? AND @dbl_granted` +
        // A lock granted by one INSERT since the decision (see grantWrites): decided again in the token's own view.
        (input.claims
          ? ` AND NOT EXISTS (SELECT 1 FROM ${LOCK_LOG_TABLE} g WHERE g.lock_key = ${LOCK_TABLE}.lock_key AND g.status IN ${LIVE_STATUSES_SQL} AND g.mode <> '${PERMIT_MODE}')`
          : ''),
      [limit, key],
    ),
    ...(input.claims ? ['SET @dbl_granted = (@dbl_granted AND ROW_COUNT() = 1)'] : []),
    format(
      `INSERT INTO ${LOCK_LOG_TABLE} (lock_key, mode, owner, holder, process_id, strategy, fencing_token, status, lease_ms, acquired_at, expires_at, wait_ms) ` +
        `SELECT ?, '${PERMIT_MODE}', ?, ?, ?, ?, LAST_INSERT_ID(), '${LockStatus.ACQUIRED}', ?, ${NOW}, ${NOW} + INTERVAL ? MICROSECOND, ? FROM DUAL WHERE @dbl_granted`,
      [key, input.acquisitionId, input.holder, input.processId, input.strategy, input.leaseMs, input.leaseMs * 1000, Math.round(input.waitedMs)],
    ),
    format(
      `SELECT @dbl_granted AS granted, @dbl_rows AS key_rows, @dbl_limit AS current_limit, @dbl_live AS live, @dbl_locked AS locked, ` +
        `@dbl_busy AS busy, @dbl_expired AS expired, @dbl_reclaimed AS reclaimed, g.id, g.fencing_token, g.expires_at, ` +
        `TIMESTAMPDIFF(MICROSECOND, @dbl_t0, g.acquired_at) AS waited_us, @dbl_t0 AS started_at ` +
        `FROM (SELECT 1 AS one) AS o LEFT JOIN ${LOCK_LOG_TABLE} g ON @dbl_granted AND g.id = LAST_INSERT_ID() AND g.owner = ?`,
      [input.acquisitionId],
    ),
    'COMMIT',
  ]);
  return { statements, parse: (results) => parseOutcome(rowsOf(results[statements.length - 2])[0] ?? {}, input, limit, takeover) };
}

/** A semaphore's plan when the request is for a permit (its target carries the limit), else undefined. */
export function semaphorePlan(input: GrantInput, takeover: boolean): StatementPlan<GrantOutcome> | undefined {
  const limit = input.targets[0]?.semaphoreLimit;
  return limit === undefined ? undefined : semaphoreGrantPlan(input, limit, takeover);
}

function parseOutcome(row: Record<string, unknown>, input: GrantInput, limit: number, takeover: boolean): GrantOutcome {
  if (Number(row.granted) === 1 && row.id !== null && row.id !== undefined)
    return {
      granted: true,
      rows: [
        { id: String(row.id), storedKey: input.targets[0]!.storedKey, fencingToken: Number(row.fencing_token), expiresAt: parseDate(row.expires_at) },
      ],
      reclaimed: Number(row.reclaimed),
      serverWaitMs: Math.max(0, Number(row.waited_us ?? 0) / 1000),
      serverStartedAt: parseDate(row.started_at),
    };
  if (Number(row.key_rows) < 1) return { granted: false, reason: 'missing-key-rows' };
  const current = row.current_limit === null || row.current_limit === undefined ? null : Number(row.current_limit);
  // A different limit is refused only while unexpired permits hold it; expired ones are taken over first.
  if (Number(row.locked) === 0 && current !== null && current !== limit && Number(row.busy) > 0)
    return { granted: false, reason: 'limit-mismatch', currentLimit: current };
  if (!takeover && Number(row.expired) > 0) return { granted: false, reason: 'expired-holders' };
  return { granted: false, reason: 'busy' };
}
