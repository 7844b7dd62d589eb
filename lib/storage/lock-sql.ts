import mysql from 'mysql2';
import type { LockTarget } from '../lock-key.js';
import { FENCING_FLOOR_KEY } from './internal-keys.js';
import { LIVE_STATUSES_SQL, LOCK_LOG_TABLE, LOCK_TABLE, LockStatus } from './lock-tables.js';

/**
 * The SQL of the lease protocol, as pure text builders (values escaped client-side by mysql2's
 * `format`, after keys and numbers were validated). Every time comparison uses the server's
 * UTC_TIMESTAMP(6): one clock for the whole cluster, immune to session time zones and DST.
 */
const format = (sql: string, values: unknown[]): string => mysql.format(sql, values as Parameters<typeof mysql.format>[1]);
const NOW = 'UTC_TIMESTAMP(6)';
const HOLD_MS = `TIMESTAMPDIFF(MICROSECOND, acquired_at, ${NOW}) DIV 1000`;

export interface GrantStatementInput {
  readonly owner: string;
  readonly holder: string;
  readonly targets: readonly LockTarget[];
  readonly leaseMs: number;
  readonly waitedMs: number;
  /** > 0: when not granted, mark write keys "writer waiting" for this long (holds back new readers). */
  readonly writerWaitMarkMs: number;
  /** Read grants respect other writers' "writer waiting" marks. */
  readonly writerPreference: boolean;
}

/** Index of the statement whose single row says whether the grant happened. */
export const GRANT_SUMMARY_INDEX = 13;
/** Index of the statement listing the granted log rows. */
export const GRANT_ROWS_INDEX = 14;

/**
 * One round trip, one transaction, all-or-nothing for every key:
 *  0. read the fencing floor with a shared lock (the janitor's reap takes it exclusively): a key
 *     row reaped and created again starts from the floor, so its tokens never go back,
 *  1. create missing key rows and lock them in key order (the same order in every process),
 *  2. fix "now" once (@dbl_now) and count live holders that conflict and were unexpired then
 *     (a writer conflicts with all, a reader with writers),
 *  3. readers also yield to a writer that marked itself waiting,
 *  4. if free: mark the conflicting holders that had expired by @dbl_now EXPIRED (that marking is
 *     what fences them), then count again: if a late renewal revived one of them after the first
 *     count, the takeover skipped it and the recount sees it, so nothing is granted,
 *  5. if still free: insert one log row per key with the key's next fencing token, bump the tokens,
 *  6. if not free: a writer marks itself waiting; nothing else changes,
 *  7. read back the outcome and the granted rows, then COMMIT.
 * The outcome is read from the rows themselves, never from affectedRows (CLIENT_FOUND_ROWS).
 *
 * Why the recount (G1): the counts are non-locking reads and renewals do not touch the key rows,
 * so a renewal of an expired-but-unreclaimed holder can commit between the first count and the
 * takeover; the takeover (a locking UPDATE) then skips the renewed row. Rows the takeover did mark
 * stay locked until COMMIT (a renewal waits, then finds them EXPIRED); every other conflicting row
 * was unexpired at @dbl_now or got so by a renewal that committed before the takeover read it, and
 * the recount (a fresh READ COMMITTED view) sees both. Locking the expired rows up front instead
 * (SELECT ... FOR UPDATE) deadlocks with releases under load (secondary-index vs clustered-row order).
 */
export function grantStatement(input: GrantStatementInput): string {
  const keys = input.targets.map((t) => t.bytes);
  const writeKeys = input.targets.filter((t) => t.mode === 'write').map((t) => t.bytes);
  const readKeys = input.targets.filter((t) => t.mode === 'read').map((t) => t.bytes);
  const conflict = conflictCondition(input.targets);
  const modeExpr = modeExpression(input.targets);
  const leaseUs = input.leaseMs * 1000;
  const statements = [
    'START TRANSACTION',
    format(`SELECT COALESCE(MAX(fencing_token), 0) INTO @dbl_floor FROM ${LOCK_TABLE} WHERE lock_key = ? LOCK IN SHARE MODE`, [FENCING_FLOOR_KEY]),
    format(
      `INSERT INTO ${LOCK_TABLE} (lock_key, fencing_token) VALUES ${keys.map(() => '(?, @dbl_floor)').join(', ')} ON DUPLICATE KEY UPDATE lock_key = lock_key`,
      keys,
    ),
    'SET @dbl_now = UTC_TIMESTAMP(6)',
    // Live conflicting holders, split into unexpired (busy) and expired (takeover candidates), in
    // one read: with no candidates, the takeover and the recount below skip their work.
    format(
      `SELECT COALESCE(SUM(expires_at > @dbl_now), 0), COALESCE(SUM(expires_at <= @dbl_now), 0) INTO @dbl_busy, @dbl_expired ` +
        `FROM ${LOCK_LOG_TABLE} WHERE lock_key IN (?) AND status IN ${LIVE_STATUSES_SQL} AND (${conflict.sql})`,
      [keys, ...conflict.values],
    ),
    readKeys.length > 0 && input.writerPreference
      ? format(`SELECT COUNT(*) INTO @dbl_writer_waiting FROM ${LOCK_TABLE} WHERE lock_key IN (?) AND writer_waiting_until > ${NOW}`, [readKeys])
      : 'SET @dbl_writer_waiting = 0',
    format(
      `UPDATE ${LOCK_LOG_TABLE} SET status = '${LockStatus.EXPIRED}', ended_at = ${NOW}, hold_ms = ${HOLD_MS}, note = ? ` +
        `WHERE @dbl_expired > 0 AND @dbl_busy = 0 AND @dbl_writer_waiting = 0 AND lock_key IN (?) AND status IN ${LIVE_STATUSES_SQL} AND expires_at <= @dbl_now AND (${conflict.sql})`,
      [`taken over by ${input.owner}`, keys, ...conflict.values],
    ),
    'SET @dbl_reclaimed = IF(@dbl_busy = 0 AND @dbl_writer_waiting = 0, ROW_COUNT(), 0)',
    // Only expired candidates can be revived by a late renewal; with none there is nothing to
    // recount. (Not "if the takeover marked any": a revived candidate is exactly one it skipped.)
    format(
      `SELECT COUNT(*) INTO @dbl_revived FROM ${LOCK_LOG_TABLE} WHERE @dbl_expired > 0 AND lock_key IN (?) AND status IN ${LIVE_STATUSES_SQL} AND expires_at > @dbl_now AND (${conflict.sql})`,
      [keys, ...conflict.values],
    ),
    'SET @dbl_granted = (@dbl_busy = 0 AND @dbl_writer_waiting = 0 AND @dbl_revived = 0)',
    format(
      `INSERT INTO ${LOCK_LOG_TABLE} (lock_key, mode, owner, holder, fencing_token, status, lease_ms, acquired_at, expires_at, wait_ms) ` +
        `SELECT l.lock_key, ${modeExpr.sql}, ?, ?, l.fencing_token + 1, '${LockStatus.ACQUIRED}', ?, ${NOW}, ${NOW} + INTERVAL ? MICROSECOND, ? ` +
        `FROM ${LOCK_TABLE} l WHERE l.lock_key IN (?) AND @dbl_granted = 1`,
      [...modeExpr.values, input.owner, input.holder, input.leaseMs, leaseUs, Math.round(input.waitedMs), keys],
    ),
    format(
      `UPDATE ${LOCK_TABLE} SET fencing_token = fencing_token + 1, last_granted_at = ${NOW}` +
        (writeKeys.length > 0 ? `, writer_waiting_until = IF(lock_key IN (?), NULL, writer_waiting_until)` : '') +
        ` WHERE lock_key IN (?) AND @dbl_granted = 1`,
      writeKeys.length > 0 ? [writeKeys, keys] : [keys],
    ),
    writeKeys.length > 0 && input.writerWaitMarkMs > 0
      ? format(
          // Refresh the mark only when less than half of it is left: a waiting writer's polls stay
          // read-only most of the time.
          `UPDATE ${LOCK_TABLE} SET writer_waiting_until = ${NOW} + INTERVAL ? MICROSECOND WHERE lock_key IN (?) AND @dbl_granted = 0 ` +
            `AND (writer_waiting_until IS NULL OR writer_waiting_until < ${NOW} + INTERVAL ? MICROSECOND)`,
          [input.writerWaitMarkMs * 1000, writeKeys, input.writerWaitMarkMs * 500],
        )
      : 'DO 0',
    `SELECT @dbl_granted AS granted, @dbl_busy + @dbl_revived AS busy, @dbl_writer_waiting AS writer_waiting, @dbl_reclaimed AS reclaimed, ${NOW} AS now_at`,
    format(`SELECT id, lock_key, fencing_token, expires_at FROM ${LOCK_LOG_TABLE} WHERE owner = ? AND @dbl_granted = 1`, [input.owner]),
    'COMMIT',
  ];
  return statements.join(';\n');
}

/** Conflicting holders: any holder of a write key, writers of a read key. */
function conflictCondition(targets: readonly LockTarget[]): { sql: string; values: unknown[] } {
  const writeKeys = targets.filter((t) => t.mode === 'write').map((t) => t.bytes);
  const readKeys = targets.filter((t) => t.mode === 'read').map((t) => t.bytes);
  const parts: string[] = [];
  const values: unknown[] = [];
  if (writeKeys.length > 0) {
    parts.push('lock_key IN (?)');
    values.push(writeKeys);
  }
  if (readKeys.length > 0) {
    parts.push(`(lock_key IN (?) AND mode = 'write')`);
    values.push(readKeys);
  }
  return { sql: parts.join(' OR '), values };
}

function modeExpression(targets: readonly LockTarget[]): { sql: string; values: unknown[] } {
  const modes = new Set(targets.map((t) => t.mode));
  if (modes.size === 1) return { sql: `'${targets[0]!.mode}'`, values: [] };
  const readKeys = targets.filter((t) => t.mode === 'read').map((t) => t.bytes);
  return { sql: `IF(l.lock_key IN (?), 'read', 'write')`, values: [readKeys] };
}

/** Ends a hold. Matched rows are exactly the still-live rows of this owner (status changes on each). */
export function releaseStatement(owner: string, status: typeof LockStatus.RELEASED | typeof LockStatus.FAILED, note?: string): string {
  return format(
    `UPDATE ${LOCK_LOG_TABLE} SET status = ?, ended_at = ${NOW}, hold_ms = ${HOLD_MS}, note = COALESCE(?, note) ` +
      `WHERE owner = ? AND status IN ${LIVE_STATUSES_SQL}`,
    [status, note ?? null, owner],
  );
}

/** Sets a new lease on every live row of one owner and reads back what is still live. */
export function extendStatement(owner: string, leaseMs: number): string {
  return [
    format(
      `UPDATE ${LOCK_LOG_TABLE} SET lease_ms = ?, expires_at = ${NOW} + INTERVAL ? MICROSECOND WHERE owner = ? AND status IN ${LIVE_STATUSES_SQL}`,
      [leaseMs, leaseMs * 1000, owner],
    ),
    format(`SELECT lock_key, expires_at FROM ${LOCK_LOG_TABLE} WHERE owner = ? AND status IN ${LIVE_STATUSES_SQL}`, [owner]),
  ].join(';\n');
}

/**
 * The watchdog's one statement per tick for all holds of this process: each live row gets its
 * own lease again from now (server time). Rows that were released or reclaimed are not touched:
 * a renewal never resurrects a lock.
 */
export function renewStatement(owners: readonly string[]): string {
  return [
    format(
      `UPDATE ${LOCK_LOG_TABLE} SET expires_at = ${NOW} + INTERVAL (lease_ms * 1000) MICROSECOND WHERE owner IN (?) AND status IN ${LIVE_STATUSES_SQL}`,
      [owners],
    ),
    format(
      `SELECT owner, COUNT(*) AS live, MIN(expires_at) AS expires_at FROM ${LOCK_LOG_TABLE} WHERE owner IN (?) AND status IN ${LIVE_STATUSES_SQL} GROUP BY owner`,
      [owners],
    ),
  ].join(';\n');
}

/**
 * The fence, run inside the business transaction just before COMMIT: flips this owner's rows
 * from ACQUIRED to COMPLETED only if no one reclaimed them. A takeover must update the same
 * rows, so InnoDB serialises the two: either the takeover waits for our commit, or we see
 * EXPIRED and roll back.
 */
export function fenceStatement(owner: string): { sql: string; parameters: unknown[] } {
  return {
    sql: `UPDATE ${LOCK_LOG_TABLE} SET status = '${LockStatus.COMPLETED}' WHERE owner = ? AND status = '${LockStatus.ACQUIRED}'`,
    parameters: [owner],
  };
}

/**
 * The fence's second look, for an owner whose rows an earlier fenced transaction already flipped
 * to COMPLETED (a lock held by an outer `withLock` or `transaction: 'none'` call, fenced once per
 * nested REQUIRES_NEW call). A locking read: it waits for a takeover that is marking the rows
 * EXPIRED right now and then sees its result, and it keeps the live rows locked until our COMMIT,
 * so no takeover can slip in between. Counting rows read (not affectedRows) makes it independent
 * of CLIENT_FOUND_ROWS.
 */
export function fenceCheckStatement(owner: string): { sql: string; parameters: unknown[] } {
  return {
    sql: `SELECT COUNT(*) AS live FROM ${LOCK_LOG_TABLE} WHERE owner = ? AND status IN ${LIVE_STATUSES_SQL} FOR UPDATE`,
    parameters: [owner],
  };
}

/** Live holders of one key, with the server's clock and the key's current fencing counter. */
export function inspectStatement(key: Buffer): string {
  return [
    format(
      `SELECT id, mode, owner, holder, fencing_token, status, acquired_at, expires_at FROM ${LOCK_LOG_TABLE} ` +
        `WHERE lock_key = ? AND status IN ${LIVE_STATUSES_SQL} AND expires_at > ${NOW} ORDER BY id`,
      [key],
    ),
    format(`SELECT ${NOW} AS now_at, (SELECT fencing_token FROM ${LOCK_TABLE} WHERE lock_key = ?) AS fencing_token`, [key]),
  ].join(';\n');
}

/** Status of every row of one owner (used to name what was lost). */
export function ownerRowsStatement(owner: string): string {
  return format(`SELECT lock_key, status, fencing_token, note FROM ${LOCK_LOG_TABLE} WHERE owner = ?`, [owner]);
}

/** Checks that both tables exist with the columns the protocol uses. */
export const SCHEMA_CHECK_STATEMENT =
  `SELECT lock_key, fencing_token, writer_waiting_until, last_granted_at FROM ${LOCK_TABLE} LIMIT 0;\n` +
  `SELECT id, lock_key, mode, owner, holder, fencing_token, status, lease_ms, acquired_at, expires_at, ended_at, wait_ms, hold_ms, note FROM ${LOCK_LOG_TABLE} LIMIT 0`;
