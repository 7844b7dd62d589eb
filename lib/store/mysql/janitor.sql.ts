import {
  affectedRowsOf,
  EFFECTIVE_EXPIRY,
  format,
  keyText,
  LIVE_STATUSES_SQL,
  LOCK_LOG_TABLE,
  LOCK_TABLE,
  LockStatus,
  currentTokenSql,
  newestClaimSql,
  NOW,
  PROCESS_TABLE,
  ROW_LOCK_TABLE,
  rowsOf,
  endHoldersStatement,
} from './sql.js';
import type { StatementPlan } from './statement-plan.js';
import { FENCING_FLOOR_KEY, INTERNAL_KEY_BYTE } from '../../core/internal-keys.js';

/**
 * The janitor's statements. Each touches at most `batchSize` rows, in a stated order (ORDER BY
 * the primary key: deterministic under statement-based binary logs), and compares times on the
 * server clock only.
 */

/** Note written on log rows the janitor expires. */
export const JANITOR_RECLAIM_NOTE = 'reclaimed by janitor';

/**
 * Expires up to `batchSize` live log rows whose lease ran out (status EXPIRED: that fences their
 * stale holders; their process's next renewal sees ended_count grow and reports the loss). The
 * candidates are read first (a plain read), then ended by id with the expiry checked again under
 * the row locks, so a renewal that landed in between wins.
 */
export function reclaimBatchPlan(candidateIds: readonly string[]): StatementPlan<{ keys: string[]; count: number }> {
  return {
    statements: [
      'START TRANSACTION',
      format(endHoldersStatement(LockStatus.EXPIRED, `g.id IN (?) AND g.status IN ${LIVE_STATUSES_SQL} AND ${EFFECTIVE_EXPIRY} <= ${NOW}`), [
        JANITOR_RECLAIM_NOTE,
        candidateIds,
      ]),
      format(`SELECT lock_key FROM ${LOCK_LOG_TABLE} WHERE id IN (?) AND status = '${LockStatus.EXPIRED}' AND note = ?`, [
        candidateIds,
        JANITOR_RECLAIM_NOTE,
      ]),
      'COMMIT',
    ],
    parse: (results) => {
      const keys = rowsOf(results[2]).map((r) => keyText(r.lock_key));
      return { keys, count: keys.length };
    },
  };
}

/** Live rows whose lease ran out by the server clock, oldest first from above `afterId` on (a plain read). */
export function expiredCandidatesStatement(batchSize: number, afterId = '0'): string {
  return format(
    `SELECT g.id FROM ${LOCK_LOG_TABLE} g LEFT JOIN ${PROCESS_TABLE} p ON p.id = g.process_id ` +
      `WHERE g.id > ? AND g.status IN ${LIVE_STATUSES_SQL} AND ${EFFECTIVE_EXPIRY} <= ${NOW} ORDER BY g.id LIMIT ?`,
    [afterId, batchSize],
  );
}

/**
 * The id of the first log row granted within the retention, searched in id order from `from` on;
 * undefined when every row from there is older. Ids follow grant time (both grow as rows are
 * inserted), so the prune's scan can stop below it without an index on the grant time, which every
 * grant and every row-lock audit row would otherwise pay for at insert.
 */
export function pruneBoundaryStatement(retentionMs: number, from: string): string {
  return format(`SELECT id FROM ${LOCK_LOG_TABLE} WHERE id >= ? AND acquired_at >= ${NOW} - INTERVAL ? MICROSECOND ORDER BY id LIMIT 1`, [
    from,
    retentionMs * 1000,
  ]);
}

/** The log rows the prune may delete (see pruneBatchPlan), as a WHERE condition. */
export function prunableCondition(retentionMs: number, claims: boolean, below?: string): string {
  return format(
    (below === undefined ? '' : 'id < ? AND ') +
      `acquired_at < ${NOW} - INTERVAL ? MICROSECOND AND ended_at < ${NOW} - INTERVAL ? MICROSECOND AND status NOT IN ${LIVE_STATUSES_SQL}` +
      (claims ? ` AND (token_claim IS NULL OR ended_at < ${NOW} - INTERVAL ? MICROSECOND)` : ''),
    [...(below === undefined ? [] : [below]), retentionMs * 1000, retentionMs * 1000, ...(claims ? [CLAIMS_KEPT_MS * 1000] : [])],
  );
}

/**
 * Deletes up to `batchSize` terminal log rows that ended more than `retentionMs` ago, in id order
 * below `below` (pruneBoundaryStatement): a scan of the primary key that ends where recent rows
 * begin. A row granted out of id order (a grant dated later than a row inserted after it) waits for
 * a later run. A row ends after its grant, so both times are tested. Where tokens are claimed the
 * prune goes through claimsPrunePlans instead (key rows lifted first).
 */
export function pruneBatchPlan(retentionMs: number, batchSize: number, below?: string): StatementPlan<number> {
  const remove = format(`DELETE FROM ${LOCK_LOG_TABLE} WHERE ${prunableCondition(retentionMs, false, below)} ORDER BY id LIMIT ?`, [batchSize]);
  return { statements: [remove], parse: (results) => affectedRowsOf(results[0]) };
}

/**
 * How long a claimed token's row outlives its end, whatever the retention: longer than a process
 * trusts a key it knows free after its release (KnownFreeKeys), so a stale one-INSERT grant always
 * meets the claim that refutes it.
 */
export const CLAIMS_KEPT_MS = 10 * 60_000;

/** A key row is idle: no live log row, no recent grant, no waiting writer, not an internal row. */
function idleCondition(idleMs: number, claims = false): { sql: string; values: unknown[] } {
  return {
    sql:
      `l.lock_key < ? AND (l.last_granted_at IS NULL OR l.last_granted_at < ${NOW} - INTERVAL ? MICROSECOND) ` +
      `AND (l.writer_waiting_until IS NULL OR l.writer_waiting_until < ${NOW}) ` +
      `AND NOT EXISTS (SELECT 1 FROM ${LOCK_LOG_TABLE} g WHERE g.lock_key = l.lock_key AND g.status IN ${LIVE_STATUSES_SQL})` +
      // One-INSERT grants never touch the key row, and a process trusts a key free for a while after its own
      // release (KnownFreeKeys): not while the key's newest claim is a hold its holder ended lately. (Ended
      // otherwise, EXPIRED or CLAIMED, no process can know the key free at that token.)
      (claims
        ? ` AND COALESCE(${newestClaimSql('l.lock_key', 'c', `IF(c.status IN ('${LockStatus.RELEASED}', '${LockStatus.FAILED}'), c.ended_at, NULL)`)}, '1970-01-01') ` +
          `< ${NOW} - INTERVAL ? MICROSECOND`
        : ''),
    values: [Buffer.from([INTERNAL_KEY_BYTE]), idleMs * 1000, ...(claims ? [Math.max(idleMs, CLAIMS_KEPT_MS) * 1000] : [])],
  };
}

/** Candidate idle key rows (a plain read, no locks). */
export function idleKeysStatement(idleMs: number, batchSize: number, claims = false): string {
  const idle = idleCondition(idleMs, claims);
  return format(`SELECT l.lock_key FROM ${LOCK_TABLE} l WHERE ${idle.sql} ORDER BY l.lock_key LIMIT ?`, [...idle.values, batchSize]);
}

/**
 * Reaping idle key rows, in one transaction of two round trips. The first takes the fencing floor
 * row exclusively (key rows are created reading it with a shared lock, so no key can come back from
 * an old floor) and locks the candidates that are still idle, skipping any someone has locked (SKIP
 * LOCKED: a key row locked right now is in use, by a grant or a row-lock holder, so it is not idle,
 * and the janitor never waits on a holder); it answers those keys and their current tokens.
 */
export function reapLockPlan(keys: readonly Buffer[], idleMs: number, claims = false): StatementPlan<{ key: Buffer; token: number }[]> {
  const idle = idleCondition(idleMs, claims);
  // Where tokens are claimed the floor also covers the reaped keys' claims (their rows may lag behind them).
  const token = currentTokenSql('l.lock_key', claims, 'l.fencing_token');
  return {
    statements: [
      'START TRANSACTION',
      // INSERT IGNORE meets an existing floor with a shared lock, which waits for nobody (key rows are created
      // under shared locks on it); the locking read then takes it NOWAIT: a key row being created right now,
      // or a row-lock holder that created one in its still-open transaction, fails it at once, and the reap
      // waits for a later run instead of queuing every new key's creation behind its own wait.
      format(`INSERT IGNORE INTO ${LOCK_TABLE} (lock_key, fencing_token) VALUES (?, 0)`, [FENCING_FLOOR_KEY]),
      format(`SELECT fencing_token FROM ${LOCK_TABLE} WHERE lock_key = ? FOR UPDATE NOWAIT`, [FENCING_FLOOR_KEY]),
      format(`SELECT l.lock_key, ${token} AS token FROM ${LOCK_TABLE} l WHERE l.lock_key IN (?) AND ${idle.sql} FOR UPDATE SKIP LOCKED`, [
        keys,
        ...idle.values,
      ]),
    ],
    parse: (results) => rowsOf(results[3]).map((r) => ({ key: r.lock_key as Buffer, token: Number(r.token) })),
  };
}

/**
 * The second round trip: raises the floor to the highest token of the rows the first locked,
 * deletes those rows and commits; answers how many it deleted (`locked` empty: it only commits).
 */
export function reapDeletePlan(locked: readonly { key: Buffer; token: number }[]): StatementPlan<number> {
  const maxToken = locked.reduce((max, row) => Math.max(max, row.token), 0);
  const deletes = locked.map(({ key }) =>
    // Only the rows locked above, each by its primary key: an IN list let the optimizer scan a small table and
    // wait on rows others hold. The live-row test again, for a claim-only grant (it never touches the key row).
    format(
      `DELETE FROM ${LOCK_TABLE} WHERE lock_key = ? AND fencing_token <= ? AND NOT EXISTS ` +
        `(SELECT 1 FROM ${LOCK_LOG_TABLE} g WHERE g.lock_key = ? AND g.status IN ${LIVE_STATUSES_SQL})`,
      [key, maxToken, key],
    ),
  );
  const raise = format(`UPDATE ${LOCK_TABLE} SET fencing_token = GREATEST(fencing_token, ?) WHERE lock_key = ?`, [maxToken, FENCING_FLOOR_KEY]);
  return {
    statements: locked.length === 0 ? ['COMMIT'] : [raise, ...deletes, 'COMMIT'],
    parse: (results) => results.slice(1, 1 + deletes.length).reduce<number>((sum, result) => sum + affectedRowsOf(result), 0),
  };
}

/**
 * The row-lock strategy's rows of keys whose key row is gone, that no holder or waiter keeps
 * locked right now (SKIP LOCKED: the janitor never waits on a holder; MariaDB 10.6+ and MySQL 8
 * both have it). Returns the keys now locked by this transaction, which the next statement deletes.
 */
export function lockIdleRowLockRowsStatement(keys: readonly Buffer[]): string {
  return format(
    `SELECT lock_key FROM ${ROW_LOCK_TABLE} WHERE lock_key IN (?) AND lock_key NOT IN (SELECT lock_key FROM ${LOCK_TABLE} WHERE lock_key IN (?)) ` +
      `ORDER BY lock_key FOR UPDATE SKIP LOCKED`,
    [keys, keys],
  );
}

export function deleteRowLockRowsStatement(keys: readonly Buffer[]): string {
  return format(`DELETE FROM ${ROW_LOCK_TABLE} WHERE lock_key IN (?)`, [keys]);
}

/** Process lease rows of processes gone for longer than `idleMs` with nothing live pointing to them. */
export function reapProcessesPlan(idleMs: number, batchSize: number): StatementPlan<number> {
  return {
    statements: [
      format(
        `DELETE FROM ${PROCESS_TABLE} WHERE renewed_at < ${NOW} - INTERVAL ? MICROSECOND ` +
          `AND NOT EXISTS (SELECT 1 FROM ${LOCK_LOG_TABLE} g WHERE g.status IN ${LIVE_STATUSES_SQL} AND g.process_id = ${PROCESS_TABLE}.id) ORDER BY id LIMIT ?`,
        [idleMs * 1000, batchSize],
      ),
    ],
    parse: (results) => affectedRowsOf(results[0]),
  };
}
