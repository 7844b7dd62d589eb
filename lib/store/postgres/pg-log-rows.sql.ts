import { FENCING_FLOOR_KEY } from '../../core/internal-keys.js';
import type { EndStatus } from '../../core/lock-status.js';
import type { RowLockAuditRow } from '../lock-store.js';
import {
  keyLiteral,
  keyText,
  LIVE_STATUSES_SQL,
  LOCK_LOG_TABLE,
  LOCK_TABLE,
  LockStatus,
  msInterval,
  msSince,
  NOW,
  nullableText,
  rowIdLiteral,
  sqlInteger,
  textLiteral,
} from './pg-sql.js';

/**
 * The statements on the rows of the lock log and of the keys, by primary key, that both
 * strategies' holds send (a grant's own batch is pg-grant.sql.ts). Each statement that ends or
 * extends rows touches only rows still live: a stale holder never disturbs a newer one.
 */

/**
 * The key rows' creation (see PgLockLog.createKeyRows); also run inside a joined transaction. A new
 * key has no holder at all: its row says no lease holder can be live (`no_lease_holders = 1`), so
 * a row-lock take of it, a reader's too, is the one-statement path until a lease grant says otherwise.
 * Only rows the statement's snapshot does not see: ON CONFLICT DO NOTHING alone waits for any
 * transaction that has the existing row updated, and a row-lock holder keeps its key's row so
 * for its whole hold (a single try that lost the race to create a key would wait out that hold).
 * ON CONFLICT still covers a row created by another transaction since the snapshot.
 */
export function createKeyRowsStatement(keys: readonly Buffer[]): string {
  return (
    `WITH floor AS (SELECT fencing_token FROM ${LOCK_TABLE} WHERE lock_key = ${keyLiteral(FENCING_FLOOR_KEY)} FOR SHARE) ` +
    `INSERT INTO ${LOCK_TABLE} (lock_key, fencing_token, no_lease_holders) SELECT k, COALESCE((SELECT max(fencing_token) FROM floor), 0), 1 ` +
    `FROM (VALUES ${keys.map((key) => `(${keyLiteral(key)})`).join(', ')}) AS wanted(k) ` +
    `WHERE NOT EXISTS (SELECT 1 FROM ${LOCK_TABLE} d WHERE d.lock_key = wanted.k) ON CONFLICT (lock_key) DO NOTHING`
  );
}

/**
 * Row-lock audit rows, terminal as written: in the commit that ends the hold (RELEASED, with the
 * work), or after a rollback (FAILED, EXPIRED) on the library's pool. ended_at is the server's clock.
 */
export function insertAuditRows(rows: readonly RowLockAuditRow[], holder: string): string {
  const columns = `INSERT INTO ${LOCK_LOG_TABLE} (lock_key, mode, owner, holder, strategy, fencing_token, status, lease_ms, acquired_at, expires_at, ended_at, wait_ms, hold_ms, note) `;
  const values = (r: RowLockAuditRow, now: string) =>
    `(${keyLiteral(r.key)}, ${textLiteral(r.mode)}, ${textLiteral(r.owner)}, ${textLiteral(holder)}, 'row-lock', ${sqlInteger(r.fencingToken)}, ` +
    `${textLiteral(r.status)}, 0, ${now} - ${sqlInteger(r.holdMs * 1000)} * interval '1 microsecond', ${now}, ${now}, ${sqlInteger(r.waitedMs)}, ` +
    `${sqlInteger(r.holdMs)}, ${nullableText(r.note)})`;
  if (rows.length === 1) return `${columns}VALUES ${values(rows[0]!, NOW)}`;
  // Several keys of one hold share one reading of the clock (a CTE with a volatile function is evaluated once), as MySQL's statement clock gives them.
  return `WITH clock AS (SELECT ${NOW} AS now) ${columns}SELECT v.* FROM clock c CROSS JOIN LATERAL (VALUES ${rows.map((r) => values(r, 'c.now')).join(', ')}) AS v`;
}

/** SQL list of row ids. */
const idList = (rowIds: readonly string[]): string => rowIds.map(rowIdLiteral).join(', ');

/**
 * Ends the rows still live; answers one row per row it ended. `heldMs`: the hold as its holder
 * measured it, else the server works it out from acquired_at.
 */
export function endRowsStatement(rowIds: readonly string[], status: EndStatus | typeof LockStatus.EXPIRED, note?: string, heldMs?: number): string {
  return (
    `UPDATE ${LOCK_LOG_TABLE} SET status = ${textLiteral(status)}, ended_at = ${NOW}, hold_ms = ${heldMs === undefined ? msSince('acquired_at') : sqlInteger(heldMs)}` +
    `${note === undefined ? '' : `, note = ${textLiteral(note.slice(0, 255))}`} WHERE id IN (${idList(rowIds)}) AND status IN ${LIVE_STATUSES_SQL}`
  );
}

/**
 * Gives back whatever a grant of unknown outcome may have committed (its connection broke, its
 * answer came too late): by acquisition id within the process, since its row ids are unknown.
 */
export function giveBackStatement(acquisitionId: string, processId: string): string {
  return (
    `UPDATE ${LOCK_LOG_TABLE} SET status = '${LockStatus.RELEASED}', ended_at = ${NOW}, hold_ms = ${msSince('acquired_at')}, ` +
    `note = 'abandoned: the caller had already given up' WHERE status IN ${LIVE_STATUSES_SQL} AND process_id = ${rowIdLiteral(processId)} ` +
    `AND owner = ${textLiteral(acquisitionId)}`
  );
}

/** A new lease from now on the live rows; answers the rows still live with their new expiry. */
export function extendStatement(rowIds: readonly string[], leaseMs: number): string {
  return (
    `UPDATE ${LOCK_LOG_TABLE} SET lease_ms = ${sqlInteger(leaseMs)}, expires_at = ${NOW} + ${msInterval(sqlInteger(leaseMs))} ` +
    `WHERE id IN (${idList(rowIds)}) AND status IN ${LIVE_STATUSES_SQL} RETURNING lock_key, expires_at`
  );
}

/** The status of each row of a lock: names what a stale holder lost. */
export function rowStatusesStatement(rowIds: readonly string[]): string {
  return `SELECT id, lock_key, status, note FROM ${LOCK_LOG_TABLE} WHERE id IN (${idList(rowIds)})`;
}

/** Of these rows, the ones no longer live (ended by someone else). */
export function endedAmongStatement(rowIds: readonly string[]): string {
  return `SELECT id FROM ${LOCK_LOG_TABLE} WHERE id IN (${idList(rowIds)}) AND status NOT IN ${LIVE_STATUSES_SQL}`;
}

export { keyText };
