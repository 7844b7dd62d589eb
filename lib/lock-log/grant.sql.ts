import type { LockTarget } from '../core/lock-key.js';
import {
  format,
  LIVE_STATUSES_SQL,
  LOCK_LOG_TABLE,
  LOCK_TABLE,
  LockStatus,
  msSince,
  NOW,
  PROCESS_TABLE,
  parseDate,
  keyText,
  rowsOf,
  type StrategyColumn,
} from '../mysql/sql.js';
import type { StatementPlan } from '../mysql/statement-plan.js';
import type { GrantedRow } from '../core/held-lock.js';

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
   * Row-lock grants on a single server: the caller holds InnoDB locks that every live row-lock
   * holder of a conflicting mode would hold too, so such holders are known dead (their connection
   * closed) and are expired, whatever their lease says. Never on a multi-primary cluster, where
   * row locks are local to one node.
   */
  readonly rowLocksAuthoritative: boolean;
  /**
   * The key's doorbell (a named lock): while another session holds it, a waiter queued first has
   * the key's next turn, so this grant is refused (local callers of the releasing process must
   * not take the key back again and again). Undefined: no doorbells (cluster, multi-key, readers).
   */
  readonly doorbell?: string;
  /**
   * Bound of each statement on the server, in ms (the caller's remaining budget plus a grace), so
   * a grant blocked on a row lock cannot commit after its caller gave up. MariaDB bounds every
   * statement (SET STATEMENT max_statement_time); MySQL bounds the locking read (MAX_EXECUTION_TIME),
   * the others being held to the session's one-second innodb_lock_wait_timeout. Undefined: unbounded.
   */
  readonly statementLimit?: { readonly kind: 'mariadb' | 'mysql'; readonly ms: number };
}

export type GrantOutcome =
  | {
      readonly granted: true;
      readonly rows: readonly GrantedRow[];
      readonly reclaimed: number;
      /** Server time from the grant's first statement to the log rows' insert: how long the grant waited on locks. */
      readonly serverWaitMs: number;
      /** When the grant's first statement started, by the server clock. */
      readonly serverStartedAt: Date;
    }
  | { readonly granted: false; readonly reason: 'busy' | 'writer-waiting' | 'expired-holders' | 'missing-key-rows' };

/** A holder's lease end: its own (grant or extend) or its process's latest renewal plus its lease, whichever is later. */
const EFFECTIVE_EXPIRY = `GREATEST(g.expires_at, COALESCE(p.renewed_at + INTERVAL g.lease_ms * 1000 MICROSECOND, g.expires_at))`;

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
  const { keys, n, conflict, dead } = shape(input);
  const readKeys = input.targets.filter((t) => t.mode === 'read').map((t) => t.bytes);
  const writerWaiting =
    readKeys.length > 0 && input.writerPreference
      ? format(`COALESCE(SUM(lock_key IN (?) AND writer_waiting_until > ${NOW}), 0)`, [readKeys])
      : '0';
  const turn = input.doorbell ? format(` AND (IS_USED_LOCK(?) IS NULL OR IS_USED_LOCK(?) = CONNECTION_ID())`, [input.doorbell, input.doorbell]) : '';
  const statements = bound(input, [
    'START TRANSACTION',
    lockKeyRows(input, writerWaiting),
    // The decision needs only the count, an index probe; busy vs expired (so a waiter knows
    // whether a takeover could help) is judged by the holders' own leases, without the join to
    // their process leases that every grant would pay: a holder whose own lease ran out but whose
    // process renewed it counts as expired here, and the takeover plan, which judges by the full
    // lease, finds it busy and takes nothing.
    format(
      `SELECT COUNT(*), COALESCE(SUM(NOT (${dead.sql}) AND g.expires_at > ${NOW}), 0), COALESCE(SUM((${dead.sql}) OR g.expires_at <= ${NOW}), 0), ` +
        `${NOW}, (@dbl_rows = ${n} AND @dbl_ww = 0 AND COUNT(*) = 0${turn}) INTO @dbl_live, @dbl_busy, @dbl_expired, @dbl_now, @dbl_granted ` +
        `FROM ${LOCK_LOG_TABLE} g WHERE g.lock_key IN (?) AND g.status IN ${LIVE_STATUSES_SQL} AND (${conflict.sql})`,
      [...dead.values, ...dead.values, keys, ...conflict.values],
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
      if (Number(summary.granted) === 1)
        return { granted: true, rows: rows.map(toGrantedRow), reclaimed: 0, serverWaitMs: waitedMs(summary), serverStartedAt: parseDate(summary.started_at) };
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
  const { keys, n, conflict, dead } = shape(input);
  const readKeys = input.targets.filter((t) => t.mode === 'read').map((t) => t.bytes);
  const writerWaiting =
    readKeys.length > 0 && input.writerPreference
      ? format(`COALESCE(SUM(lock_key IN (?) AND writer_waiting_until > ${NOW}), 0)`, [readKeys])
      : '0';
  const note = `taken over by ${input.acquisitionId}`;
  const statements = bound(input, [
    'START TRANSACTION',
    lockKeyRows(input, writerWaiting),
    format(
      `SELECT COALESCE(SUM(NOT (${dead.sql}) AND ${EFFECTIVE_EXPIRY} > ${NOW}), 0) INTO @dbl_busy ` +
        `FROM ${LOCK_LOG_TABLE} g LEFT JOIN ${PROCESS_TABLE} p ON p.id = g.process_id ` +
        `WHERE g.lock_key IN (?) AND g.status IN ${LIVE_STATUSES_SQL} AND (${conflict.sql})`,
      [...dead.values, keys, ...conflict.values],
    ),
    // Locking reads of both tables: a renewal of the holder's process in flight is waited for and seen.
    format(
      `UPDATE ${LOCK_LOG_TABLE} g LEFT JOIN ${PROCESS_TABLE} p ON p.id = g.process_id ` +
        `SET g.status = '${LockStatus.EXPIRED}', g.ended_at = ${NOW}, g.hold_ms = ${msSince('g.acquired_at')}, g.note = ?, p.ended_count = p.ended_count + 1 ` +
        `WHERE @dbl_busy = 0 AND @dbl_ww = 0 AND g.lock_key IN (?) AND g.status IN ${LIVE_STATUSES_SQL} AND (${conflict.sql}) ` +
        `AND ((${dead.sql}) OR ${EFFECTIVE_EXPIRY} <= ${NOW})`,
      [note, keys, ...conflict.values, ...dead.values],
    ),
    format(
      `SELECT COUNT(*) INTO @dbl_reclaimed FROM ${LOCK_LOG_TABLE} WHERE lock_key IN (?) AND status = '${LockStatus.EXPIRED}' AND note = ?`,
      [keys, note],
    ),
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
      if (Number(summary.granted) === 1)
        return {
          granted: true,
          rows: rows.map(toGrantedRow),
          reclaimed: Number(summary.reclaimed),
          serverWaitMs: waitedMs(summary),
          serverStartedAt: parseDate(summary.started_at),
        };
      if (Number(summary.key_rows) < n) return { granted: false, reason: 'missing-key-rows' };
      if (Number(summary.writer_waiting) > 0) return { granted: false, reason: 'writer-waiting' };
      return { granted: false, reason: 'busy' };
    },
  };
}

/**
 * Creates missing key rows, in their own committed transaction (never on the path of a grant that
 * found its rows). A key row created after the janitor reaped it starts from the fencing floor
 * (read with a shared lock: the reap takes it exclusively), so a key's tokens never go back.
 * The row-lock strategy's row is created with it.
 */
export function createKeyRowsPlan(keys: readonly Buffer[], floorKey: Buffer, sharedLockClause: string, rowLockTable: string): StatementPlan<void> {
  return {
    statements: [
      'START TRANSACTION',
      format(`SELECT COALESCE(MAX(fencing_token), 0) INTO @dbl_floor FROM ${LOCK_TABLE} WHERE lock_key = ? ${sharedLockClause}`, [floorKey]),
      format(
        `INSERT INTO ${LOCK_TABLE} (lock_key, fencing_token) VALUES ${keys.map(() => '(?, @dbl_floor)').join(', ')} ON DUPLICATE KEY UPDATE lock_key = lock_key`,
        keys,
      ),
      // Only the row-lock rows that do not exist yet: a row-lock holder keeps an exclusive lock on
      // its row for its whole hold, and INSERT IGNORE of an existing key would wait for it (its
      // duplicate check locks the row). At READ COMMITTED the NOT IN subquery is a plain read.
      format(
        `INSERT IGNORE INTO ${rowLockTable} (lock_key) SELECT k FROM (${keys.map(() => 'SELECT ? AS k').join(' UNION ALL ')}) AS wanted ` +
          `WHERE k NOT IN (SELECT lock_key FROM ${rowLockTable} WHERE lock_key IN (?))`,
        [...keys, keys],
      ),
      'COMMIT',
    ],
    parse: () => undefined,
  };
}

/**
 * After COMMIT, on a multi-primary cluster: what really committed. Granted only if every key has
 * exactly this acquisition's live row with the token the grant read back.
 */
export function confirmGrantPlan(acquisitionId: string, rows: readonly GrantedRow[]): StatementPlan<{ confirmed: boolean; found: number }> {
  return {
    statements: [
      format(`SELECT id, lock_key, fencing_token, status FROM ${LOCK_LOG_TABLE} WHERE id IN (?) AND owner = ?`, [rows.map((r) => r.id), acquisitionId]),
    ],
    parse: (results) => {
      const found = rowsOf(results[0]);
      const confirmed =
        found.length === rows.length &&
        rows.every((row) =>
          found.some((f) => String(f.id) === row.id && Number(f.fencing_token) === row.fencingToken && f.status === LockStatus.ACQUIRED),
        );
      return { confirmed, found: found.length };
    },
  };
}

/**
 * Locks the keys' rows in key order and counts them; also notes when the batch started on the
 * server (a statement's clock is fixed when it starts, before any lock wait), so the caller can
 * tell how much later than its send time the lease started counting.
 */
function lockKeyRows(input: GrantInput, writerWaiting: string): string {
  return format(
    `SELECT COUNT(*), ${writerWaiting}, ${NOW} INTO @dbl_rows, @dbl_ww, @dbl_t0 FROM ${LOCK_TABLE} WHERE lock_key IN (?) FOR UPDATE`,
    [input.targets.map((t) => t.bytes)],
  );
}

/** Bounds every statement of a plan on the server (see GrantInput.statementLimit). */
function bound(input: GrantInput, statements: string[]): string[] {
  const limit = input.statementLimit;
  if (!limit) return statements;
  const ms = Math.max(1, Math.ceil(limit.ms));
  return statements.map((sql) => {
    if (/^(START|COMMIT|SET )/.test(sql)) return sql;
    if (limit.kind === 'mariadb') return `SET STATEMENT max_statement_time = ${(ms / 1000).toFixed(3)} FOR ${sql}`;
    return /^SELECT .* FOR UPDATE$/s.test(sql) ? sql.replace(/^SELECT /, `SELECT /*+ MAX_EXECUTION_TIME(${ms}) */ `) : sql;
  });
}

function waitedMs(summary: Record<string, unknown>): number {
  return Math.max(0, Number(summary.waited_us ?? 0) / 1000);
}

function shape(input: GrantInput) {
  const keys = input.targets.map((t) => t.bytes);
  const writeKeys = input.targets.filter((t) => t.mode === 'write').map((t) => t.bytes);
  const readKeys = input.targets.filter((t) => t.mode === 'read').map((t) => t.bytes);
  const parts: string[] = [];
  const values: unknown[] = [];
  if (writeKeys.length > 0) {
    parts.push('g.lock_key IN (?)');
    values.push(writeKeys);
  }
  if (readKeys.length > 0) {
    parts.push(`(g.lock_key IN (?) AND g.mode = 'write')`);
    values.push(readKeys);
  }
  // A live row-lock holder whose InnoDB lock the caller now holds must be dead. A reader's shared
  // lock proves only that no row-lock *writer* is alive, which is all a reader conflicts with.
  const dead =
    input.strategy === 'row-lock' && input.rowLocksAuthoritative
      ? { sql: `g.strategy = 'row-lock'`, values: [] as unknown[] }
      : { sql: 'FALSE', values: [] as unknown[] };
  return { keys, n: keys.length, conflict: { sql: parts.join(' OR '), values }, dead };
}

function grantWrites(input: GrantInput, granted: string): string[] {
  const keys = input.targets.map((t) => t.bytes);
  const writeKeys = input.targets.filter((t) => t.mode === 'write').map((t) => t.bytes);
  const readKeys = input.targets.filter((t) => t.mode === 'read').map((t) => t.bytes);
  const mode =
    readKeys.length === 0 ? `'write'` : writeKeys.length === 0 ? `'read'` : format(`IF(l.lock_key IN (?), 'read', 'write')`, [readKeys]);
  return [
    format(
      `UPDATE ${LOCK_TABLE} SET fencing_token = fencing_token + 1, last_granted_at = ${NOW}` +
        (writeKeys.length > 0 ? `, writer_waiting_until = IF(lock_key IN (?), NULL, writer_waiting_until)` : '') +
        ` WHERE lock_key IN (?) AND ${granted}`,
      writeKeys.length > 0 ? [writeKeys, keys] : [keys],
    ),
    format(
      `INSERT INTO ${LOCK_LOG_TABLE} (lock_key, mode, owner, holder, process_id, strategy, fencing_token, status, lease_ms, acquired_at, expires_at, wait_ms) ` +
        // The insert's own clock: a holder's interval starts after the decision's read view, never
        // before the previous holder's release (an earlier timestamp would show false overlaps).
        `SELECT l.lock_key, ${mode}, ?, ?, ?, ?, l.fencing_token, '${LockStatus.ACQUIRED}', ?, ${NOW}, ${NOW} + INTERVAL ? MICROSECOND, ? ` +
        `FROM ${LOCK_TABLE} l WHERE l.lock_key IN (?) AND ${granted}`,
      [input.acquisitionId, input.holder, input.processId, input.strategy, input.leaseMs, input.leaseMs * 1000, Math.round(input.waitedMs), keys],
    ),
  ];
}

/** A waiting writer holds back new readers (writer preference); refreshed only when less than half of the mark is left. */
function writerMark(input: GrantInput): string[] {
  const writeKeys = input.targets.filter((t) => t.mode === 'write').map((t) => t.bytes);
  if (writeKeys.length === 0 || input.writerWaitMarkMs <= 0) return [];
  return [
    format(
      `UPDATE ${LOCK_TABLE} SET writer_waiting_until = ${NOW} + INTERVAL ? MICROSECOND WHERE lock_key IN (?) AND NOT @dbl_granted ` +
        `AND (writer_waiting_until IS NULL OR writer_waiting_until < ${NOW} + INTERVAL ? MICROSECOND)`,
      [input.writerWaitMarkMs * 1000, writeKeys, input.writerWaitMarkMs * 500],
    ),
  ];
}

/** The outcome of a single-key grant: its row read back by primary key (the insert id). */
function singleOutcomeQuery(summary: string): string {
  const [busy, expired, reclaimed] = summary.split(',').map((s) => s.trim());
  return (
    `SELECT @dbl_granted AS granted, @dbl_rows AS key_rows, ${busy} AS busy, ${expired} AS expired, @dbl_ww AS writer_waiting, ${reclaimed} AS reclaimed, ` +
    `g.id, g.lock_key, g.fencing_token, g.expires_at, TIMESTAMPDIFF(MICROSECOND, @dbl_t0, g.acquired_at) AS waited_us, @dbl_t0 AS started_at ` +
    `FROM (SELECT 1 AS one) AS o LEFT JOIN ${LOCK_LOG_TABLE} g ON @dbl_granted AND g.id = LAST_INSERT_ID()`
  );
}

/** One summary row when not granted; one row per granted key otherwise (the summary repeated on each). */
function outcomeQuery(input: GrantInput, summary: string): string {
  const [rows, busy, expired, ww, reclaimed] = summary.split(',').map((s) => s.trim());
  return format(
    `SELECT @dbl_granted AS granted, ${rows} AS key_rows, ${busy} AS busy, ${expired} AS expired, ${ww} AS writer_waiting, ${reclaimed} AS reclaimed, ` +
      `g.id, g.lock_key, g.fencing_token, g.expires_at, TIMESTAMPDIFF(MICROSECOND, @dbl_t0, g.acquired_at) AS waited_us, @dbl_t0 AS started_at ` +
      `FROM (SELECT 1 AS one) AS o LEFT JOIN ${LOCK_LOG_TABLE} g ON @dbl_granted AND g.id >= LAST_INSERT_ID() AND g.owner = ?`,
    [input.acquisitionId],
  );
}

function toGrantedRow(row: Record<string, unknown>): GrantedRow {
  return {
    id: String(row.id),
    storedKey: keyText(row.lock_key),
    fencingToken: Number(row.fencing_token),
    expiresAt: parseDate(row.expires_at),
  };
}
