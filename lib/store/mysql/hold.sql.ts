import {
  affectedRowsOf,
  type EndStatus,
  escape,
  format,
  keyText,
  LIVE_STATUSES_SQL,
  LOCK_LOG_TABLE,
  LockStatus,
  msSince,
  sqlInteger,
  NOW,
  parseDate,
  PROCESS_TABLE,
  rowsOf,
} from './sql.js';
import type { StatementPlan } from './statement-plan.js';

/**
 * Statements on the log rows of one held lock (by row id: the primary key, no secondary-index
 * search). Each counts rows it changed; a row that someone else already ended (taken over,
 * reclaimed, force-released) is never touched, so a stale holder can never disturb a newer one.
 */

/**
 * Ends the rows that are still live; returns how many it ended. `heldMs`: the hold as its holder
 * measured it (as row-lock audit rows have it), sent as a number; else the server works it out
 * from acquired_at, which costs a release measurably more.
 */
export function endRowsPlan(
  rowIds: readonly string[],
  status: EndStatus | typeof LockStatus.EXPIRED,
  note?: string,
  heldMs?: number,
): StatementPlan<number> {
  const ids = rowIds.length === 1 ? `= ${Number(rowIds[0])}` : `IN (${rowIds.map(Number).join(', ')})`;
  return {
    statements: [
      // By primary key only: left to itself the optimizer weighs the status indexes too, a measurable
      // part of a release. Built by hand (the release's hot path): ids are numbers, the rest escaped.
      `UPDATE ${LOCK_LOG_TABLE} FORCE INDEX (PRIMARY) SET status = ${escape(status)}, ended_at = ${NOW}, hold_ms = ${heldMs === undefined ? msSince('acquired_at') : sqlInteger(heldMs)}` +
        `${note === undefined ? '' : `, note = ${escape(note)}`} WHERE id ${ids} AND status IN ${LIVE_STATUSES_SQL}`,
    ],
    parse: (results) => affectedRowsOf(results[0]),
  };
}

/**
 * Gives back whatever an attempt of unknown outcome may have committed (connection lost mid-grant):
 * by acquisition id within its process (index on status, process_id), since its row ids are unknown.
 */
export function giveBackPlan(acquisitionId: string, processId: string, note = 'abandoned: the caller had already given up'): StatementPlan<number> {
  return {
    statements: [
      format(
        `UPDATE ${LOCK_LOG_TABLE} SET status = '${LockStatus.RELEASED}', ended_at = ${NOW}, hold_ms = ${msSince('acquired_at')}, ` +
          `note = ? WHERE status IN ${LIVE_STATUSES_SQL} AND process_id = ? AND owner = ?`,
        [note, processId, acquisitionId],
      ),
    ],
    parse: (results) => affectedRowsOf(results[0]),
  };
}

/** A new lease from now on the live rows; returns the rows still live with their new expiry. */
export function extendPlan(rowIds: readonly string[], leaseMs: number): StatementPlan<{ storedKey: string; expiresAt: Date }[]> {
  return {
    statements: [
      format(
        `UPDATE ${LOCK_LOG_TABLE} SET lease_ms = ?, expires_at = ${NOW} + INTERVAL ? MICROSECOND WHERE id IN (?) AND status IN ${LIVE_STATUSES_SQL}`,
        [leaseMs, leaseMs * 1000, rowIds],
      ),
      format(`SELECT lock_key, expires_at FROM ${LOCK_LOG_TABLE} WHERE id IN (?) AND status IN ${LIVE_STATUSES_SQL}`, [rowIds]),
    ],
    parse: (results) => rowsOf(results[1]).map((row) => ({ storedKey: keyText(row.lock_key), expiresAt: parseDate(row.expires_at) })),
  };
}

/** The status of every row of a lock: names what a stale holder lost. */
export function rowStatusesPlan(rowIds: readonly string[]): StatementPlan<{ id: string; storedKey: string; status: string; note: string | null }[]> {
  return {
    statements: [format(`SELECT id, lock_key, status, note FROM ${LOCK_LOG_TABLE} WHERE id IN (?)`, [rowIds])],
    parse: (results) =>
      rowsOf(results[0]).map((row) => ({
        id: String(row.id),
        storedKey: keyText(row.lock_key),
        status: String(row.status),
        note: row.note === null || row.note === undefined ? null : String(row.note),
      })),
  };
}

/** Of these rows, the ones no longer live (ended by someone else). */
export function endedAmongPlan(rowIds: readonly string[]): StatementPlan<Set<string>> {
  return {
    statements: [format(`SELECT id FROM ${LOCK_LOG_TABLE} WHERE id IN (?) AND status NOT IN ${LIVE_STATUSES_SQL}`, [rowIds])],
    parse: (results) => new Set(rowsOf(results[0]).map((row) => String(row.id))),
  };
}

/**
 * The fence, inside the business transaction just before COMMIT, for locks that end with it:
 * their live rows become RELEASED in the very transaction that commits the work. A takeover must
 * write the same rows (to EXPIRED), so InnoDB orders the two: either the takeover waits for our
 * COMMIT, or we find fewer live rows than we hold and roll back. On a multi-primary cluster the
 * rows are written, hence certified: a takeover committed on another node makes our COMMIT fail.
 */
export function endInCommitStatement(rowIds: readonly string[], owner?: string): { sql: string; parameters: unknown[] } {
  return {
    sql:
      `UPDATE ${LOCK_LOG_TABLE} SET status = '${LockStatus.RELEASED}', ended_at = ${NOW}, hold_ms = ${msSince('acquired_at')} ` +
      `WHERE id IN (?) AND status IN ${LIVE_STATUSES_SQL}${ownerCondition(owner)}`,
    parameters: owner === undefined ? [rowIds] : [rowIds, owner],
  };
}

/**
 * The fence for locks that outlive the transaction (held by an outer `withLock` or by the caller
 * of a nested REQUIRES_NEW call): the rows stay live, but are written all the same (COMPLETED,
 * one more fenced commit), never merely read, so the fence holds on a cluster too. Every matched
 * row changes, so the count is the same with CLIENT_FOUND_ROWS on or off.
 */
export function fenceKeptStatement(rowIds: readonly string[], owner?: string): { sql: string; parameters: unknown[] } {
  return {
    sql:
      `UPDATE ${LOCK_LOG_TABLE} SET status = '${LockStatus.COMPLETED}', fenced_count = fenced_count + 1 ` +
      `WHERE id IN (?) AND status IN ${LIVE_STATUSES_SQL}${ownerCondition(owner)}`,
    parameters: owner === undefined ? [rowIds] : [rowIds, owner],
  };
}

/**
 * A fence also checks the rows' owner (the acquisition id, a UUID), not only their ids: after a
 * failover to an asynchronous replica that never received the grant, its row ids can be handed
 * out again to a newer holder's rows, and a fence by id alone would then write those and commit.
 */
function ownerCondition(owner: string | undefined): string {
  return owner === undefined ? '' : ' AND owner = ?';
}

/**
 * One process lease renewal, whatever the number of locks held: the process row only. Returns
 * ended_count, which grows when another session ended one of this process's live rows. An upsert:
 * the janitor reaps the rows of processes that held nothing for long, and a process that then
 * takes a lock again gets its row back under the same id (`created`: then ended_count starts at 0
 * again, and whatever ended this process's rows meanwhile bumped no count).
 */
export function renewProcessPlan(processId: string, holder: string): StatementPlan<{ endedCount: string; created: boolean; serverNow?: Date }> {
  return {
    statements: [
      format(
        `INSERT INTO ${PROCESS_TABLE} (id, holder, started_at, renewed_at) VALUES (?, ?, ${NOW}, ${NOW}) ON DUPLICATE KEY UPDATE renewed_at = ${NOW}`,
        [processId, holder],
      ),
      format(`SELECT ended_count, ${NOW} AS now_at FROM ${PROCESS_TABLE} WHERE id = ?`, [processId]),
    ],
    parse: (results) => {
      const row = rowsOf(results[1])[0];
      // An upsert's affected rows: 1 inserted, 2 updated (renewed_at always changes).
      const created = Number((results[0] as { affectedRows?: number } | undefined)?.affectedRows) === 1;
      return {
        endedCount: String(row?.ended_count ?? '0'),
        created,
        serverNow: row?.now_at ? parseDate(row.now_at) : undefined,
      };
    },
  };
}

export function registerProcessStatement(holder: string): string {
  return format(`INSERT INTO ${PROCESS_TABLE} (holder, started_at, renewed_at) VALUES (?, ${NOW}, ${NOW})`, [holder]);
}

/** At shutdown, after every lock was released: the row is no longer needed. */
export function endProcessStatement(processId: string): string {
  return format(
    `DELETE FROM ${PROCESS_TABLE} WHERE id = ? AND NOT EXISTS (SELECT 1 FROM ${LOCK_LOG_TABLE} WHERE status IN ${LIVE_STATUSES_SQL} AND process_id = ?)`,
    [processId, processId],
  );
}
