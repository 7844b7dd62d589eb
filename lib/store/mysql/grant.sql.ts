import type { LockTarget } from '../../core/lock-key.js';
import {
  EFFECTIVE_EXPIRY,
  format,
  LIVE_STATUSES_SQL,
  LOCK_LOG_TABLE,
  LockStatus,
  NOW,
  ourTurnSql,
  keyLiteral,
  PROCESS_TABLE,
  parseDate,
  rowsOf,
  type StrategyColumn,
  endHoldersStatement,
} from './sql.js';
import type { StatementPlan } from './statement-plan.js';
import {
  bound,
  grantWrites,
  lockKeyRows,
  outcomeQuery,
  shape,
  singleOutcomeQuery,
  toGrantedRow,
  waitedMs,
  writerMark,
} from './grant-statements.sql.js';
import type { GrantOutcome } from '../lock-store.js';

export interface GrantInput {
  readonly acquisitionId: string;
  /** host:pid of the granting process. */
  readonly holder: string;
  /** Its process lease row. */
  readonly processId: string;
  readonly strategy: StrategyColumn;
  readonly targets: readonly LockTarget[];
  readonly leaseMs: number;
  readonly waitedMs: number;
  /** > 0: when not granted, mark write keys "writer waiting" for this long (holds back new readers). */
  readonly writerWaitMarkMs: number;
  /** Read grants respect other writers' "writer waiting" marks. */
  readonly writerPreference: boolean;
  /**
   * The key's doorbell (a named lock): while another session holds it, a waiter queued first has
   * the key's next turn, so this grant is refused (local callers of the releasing process must
   * not take the key back again and again). Undefined: no doorbells (cluster, multi-key, readers).
   */
  readonly doorbell?: string;
  /** See GrantRequest.connectBy. */
  readonly connectBy?: number;
  /**
   * Bound of each statement on the server, in ms (the caller's remaining budget plus a grace), so
   * a grant blocked on a row lock cannot commit after its caller gave up. MariaDB bounds every
   * statement (SET STATEMENT max_statement_time); MySQL bounds the locking read (MAX_EXECUTION_TIME),
   * the others being held to the session's one-second innodb_lock_wait_timeout. Undefined: unbounded.
   */
  readonly statementLimit?: { readonly kind: 'mariadb' | 'mysql'; readonly ms: number };
  /** Tokens are claimed (AddTokenClaims): each grant hands out one above the key row's and every claim's. */
  readonly claims?: boolean;
}

export type { GrantOutcome };

/**
 * The common grant: a free key with no expired holder. One transaction, one commit; the rare
 * work (taking over expired holders, creating key rows) is left to `takeoverGrantPlan` /
 * `createKeyRowsPlan`, sent only when this one reports it is needed:
 *  1. lock the keys' rows in key order (the same order in every process), count them, note their
 *     tokens and when the batch started (a statement's clock is fixed when it starts);
 *  2. after the lock (READ COMMITTED: a fresh view per statement), count live conflicting holders
 *     (split by their own leases into unexpired and possibly expired, so a waiter knows whether a
 *     takeover could help), fix "now", and decide;
 *  3. if granted: bump each key's fencing token, insert one log row per key with it;
 *  4. read the decision back (never affectedRows: CLIENT_FOUND_ROWS) with the granted rows (a
 *     single key's by primary key, the insert id).
 */
export function leanGrantPlan(input: GrantInput): StatementPlan<GrantOutcome> {
  const { keys, n, conflict } = shape(input);
  const readKeys = input.targets.filter((t) => t.mode === 'read').map((t) => t.bytes);
  const writerWaiting =
    readKeys.length > 0 && input.writerPreference ? format(`COALESCE(SUM(lock_key IN (?) AND writer_waiting_until > ${NOW}), 0)`, [readKeys]) : '0';
  const bellKey = input.claims === true && input.targets.length === 1 ? keyLiteral(input.targets[0]!.bytes) : undefined;
  const turn = input.doorbell ? ` AND ${ourTurnSql(input.doorbell, bellKey)}` : '';
  const statements = bound(input, [
    'START TRANSACTION',
    lockKeyRows(input, writerWaiting),
    // The decision needs only the count, an index probe; busy vs expired (so a waiter knows
    // whether a takeover could help) is judged by the holders' own leases, without the join to
    // their process leases that every grant would pay: a holder whose own lease ran out but whose
    // process renewed it counts as expired here, and the takeover plan, which judges by the full
    // lease, finds it busy and takes nothing.
    format(
      `SELECT COUNT(*), COALESCE(SUM(g.expires_at > ${NOW}), 0), COALESCE(SUM(g.expires_at <= ${NOW}), 0), ` +
        `${NOW}, (@dbl_rows = ${n} AND @dbl_ww = 0 AND COUNT(*) = 0${turn}) INTO @dbl_live, @dbl_busy, @dbl_expired, @dbl_now, @dbl_granted ` +
        `FROM ${LOCK_LOG_TABLE} g WHERE g.lock_key IN (?) AND g.status IN ${LIVE_STATUSES_SQL} AND (${conflict.sql})`,
      [keys, ...conflict.values],
    ),
    ...grantWrites(input, '@dbl_granted'),
    ...writerMark(input),
    n === 1 ? singleOutcomeQuery('@dbl_busy, @dbl_expired, 0') : outcomeQuery(input, '@dbl_rows, @dbl_busy, @dbl_expired, @dbl_ww, 0'),
    'COMMIT',
  ]);
  return {
    statements,
    parse: (results) => {
      const rows = rowsOf(results[statements.length - 2]);
      const summary = rows[0] ?? {};
      if (Number(summary.granted) === 1) return grantedOutcome(rows, summary);
      if (Number(summary.key_rows) < n) return { granted: false, reason: 'missing-key-rows' };
      if (Number(summary.busy) > 0) return { granted: false, reason: 'busy' };
      if (Number(summary.writer_waiting) > 0) return { granted: false, reason: 'writer-waiting' };
      if (Number(summary.expired) > 0) return { granted: false, reason: 'expired-holders' };
      return { granted: false, reason: 'busy' };
    },
  };
}

/**
 * The grant that takes over holders whose lease ran out (or, row-lock, whose connection closed).
 * As the lean grant, plus: mark those holders EXPIRED (that marking is what fences them: their
 * fenced commits and releases now find nothing live) and tell their processes (ended_count), then
 * count again: a late renewal that committed between the first count and the takeover revives
 * a holder the takeover then skips (its locking read sees the renewal), and the recount — a fresh
 * READ COMMITTED view — sees it, so nothing is granted rather than two holders.
 */
export function takeoverGrantPlan(input: GrantInput): StatementPlan<GrantOutcome> {
  const { keys, n, conflict } = shape(input);
  const readKeys = input.targets.filter((t) => t.mode === 'read').map((t) => t.bytes);
  const writerWaiting =
    readKeys.length > 0 && input.writerPreference ? format(`COALESCE(SUM(lock_key IN (?) AND writer_waiting_until > ${NOW}), 0)`, [readKeys]) : '0';
  const note = `taken over by ${input.acquisitionId}`;
  const statements = bound(input, [
    'START TRANSACTION',
    lockKeyRows(input, writerWaiting),
    format(
      `SELECT COALESCE(SUM(${EFFECTIVE_EXPIRY} > ${NOW}), 0) INTO @dbl_busy ` +
        `FROM ${LOCK_LOG_TABLE} g LEFT JOIN ${PROCESS_TABLE} p ON p.id = g.process_id ` +
        `WHERE g.lock_key IN (?) AND g.status IN ${LIVE_STATUSES_SQL} AND (${conflict.sql})`,
      [keys, ...conflict.values],
    ),
    // Locking reads of both tables: a renewal of the holder's process in flight is waited for and seen.
    format(
      endHoldersStatement(
        LockStatus.EXPIRED,
        `@dbl_busy = 0 AND @dbl_ww = 0 AND g.lock_key IN (?) AND g.status IN ${LIVE_STATUSES_SQL} AND (${conflict.sql}) AND ${EFFECTIVE_EXPIRY} <= ${NOW}`,
      ),
      [note, keys, ...conflict.values],
    ),
    format(`SELECT COUNT(*) INTO @dbl_reclaimed FROM ${LOCK_LOG_TABLE} WHERE lock_key IN (?) AND status = '${LockStatus.EXPIRED}' AND note = ?`, [
      keys,
      note,
    ]),
    format(
      `SELECT COUNT(*), (@dbl_rows = ${n} AND @dbl_ww = 0 AND @dbl_busy = 0 AND COUNT(*) = 0) INTO @dbl_revived, @dbl_granted ` +
        `FROM ${LOCK_LOG_TABLE} g WHERE g.lock_key IN (?) AND g.status IN ${LIVE_STATUSES_SQL} AND (${conflict.sql})`,
      [keys, ...conflict.values],
    ),
    ...grantWrites(input, '@dbl_granted'),
    ...writerMark(input),
    outcomeQuery(input, '@dbl_rows, @dbl_busy + @dbl_revived, 0, @dbl_ww, @dbl_reclaimed'),
    'COMMIT',
  ]);
  return {
    statements,
    parse: (results) => {
      const rows = rowsOf(results[statements.length - 2]);
      const summary = rows[0] ?? {};
      if (Number(summary.granted) === 1) return grantedOutcome(rows, summary);
      if (Number(summary.key_rows) < n) return { granted: false, reason: 'missing-key-rows' };
      if (Number(summary.writer_waiting) > 0) return { granted: false, reason: 'writer-waiting' };
      return { granted: false, reason: 'busy' };
    },
  };
}

/** A granted plan's answer: one row per key, the summary (reclaimed holders, when the batch started) repeated on each. */
function grantedOutcome(rows: readonly Record<string, unknown>[], summary: Record<string, unknown>): GrantOutcome {
  return {
    granted: true,
    rows: rows.map(toGrantedRow),
    reclaimed: Number(summary.reclaimed),
    serverWaitMs: waitedMs(summary),
    serverStartedAt: parseDate(summary.started_at),
  };
}
