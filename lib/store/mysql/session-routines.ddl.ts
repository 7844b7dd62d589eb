import { takeWriteKeysWhere } from './take-write-keys.sql.js';
import { LIVE_STATUSES_SQL, LOCK_LOG_TABLE, LockStatus, msSince, NOW } from './sql-text.js';

/**
 * Stored procedures that save round trips on a business transaction's connection: one opens a
 * row-lock hold's transaction and takes its key, the others end a hold and commit. That connection
 * belongs to the app, which does not enable multi-statement batches on it, so without them each
 * statement costs a round trip of its own; and sending an end and a COMMIT back to back would
 * commit the work even when the end failed. In a routine an unhandled error, or a SIGNAL, stops it
 * before its COMMIT: nothing is committed and the transaction stays open for the caller to roll back.
 *
 * Created by migrations (AddCommitRoutines1796947200000 the commit routines,
 * AddBeginAndTakeRoutine1797552000000 the begin-and-take one); a server without them, or where the
 * app's user may not see or run them, gets the separate round trips. A changed body gets a new
 * name, so an app never calls a body it was not written for.
 */

/**
 * Lease: the fence of a fenced call ending one lock of one row (same statement and ordering argument
 * as endInCommitStatement). If the row is no longer live (the lock was taken over) it raises
 * LOST_SIGNAL instead of committing.
 */
export const END_AND_COMMIT = 'db_lock_end_and_commit_v1';
/** Row-lock: the audit row of a single-key hold, then COMMIT (the row is in the commit, or neither is). */
export const RECORD_AND_COMMIT = 'db_lock_record_and_commit_v1';
/** The routines AddCommitRoutines1796947200000 installs (a shipped migration: this list never changes). */
export const COMMIT_ROUTINES = [END_AND_COMMIT, RECORD_AND_COMMIT] as const;
export type CommitRoutine = (typeof COMMIT_ROUTINES)[number];
/**
 * Row-lock: START TRANSACTION and the single write key's locking UPDATE (the same statement as
 * takeWriteKeys), then whether it took the row and the new token as a one-row result (a CALL's OK
 * packet carries no insert id). The transaction stays open after the CALL: the hold is that
 * transaction. A lock wait that runs out stops the routine with the transaction open, as the
 * UPDATE alone would leave it: the caller rolls it back.
 */
export const BEGIN_AND_TAKE = 'db_lock_begin_and_take_v1';
/** Every routine the library may call. */
export const SESSION_ROUTINES = [...COMMIT_ROUTINES, BEGIN_AND_TAKE] as const;
export type SessionRoutine = (typeof SESSION_ROUTINES)[number];

/** The text of the SIGNAL END_AND_COMMIT raises when the row was no longer live. */
export const LOST_SIGNAL = 'nestjs-db-lock: the lock was no longer held at its fenced commit';

export function createRoutineStatement(routine: SessionRoutine): string {
  if (routine === BEGIN_AND_TAKE)
    return (
      `CREATE PROCEDURE \`${BEGIN_AND_TAKE}\`(IN p_key VARBINARY(764)) MODIFIES SQL DATA\n` +
      `BEGIN\n` +
      `  START TRANSACTION;\n` +
      `  ${takeWriteKeysWhere('lock_key = p_key', true)};\n` +
      `  SELECT ROW_COUNT() AS taken, LAST_INSERT_ID() AS token;\n` +
      `END`
    );
  if (routine === END_AND_COMMIT)
    return (
      `CREATE PROCEDURE \`${END_AND_COMMIT}\`(IN p_id BIGINT UNSIGNED, IN p_owner CHAR(36)) MODIFIES SQL DATA\n` +
      `BEGIN\n` +
      `  UPDATE ${LOCK_LOG_TABLE} FORCE INDEX (PRIMARY) SET status = '${LockStatus.RELEASED}', ended_at = ${NOW}, hold_ms = ${msSince('acquired_at')}\n` +
      `    WHERE id = p_id AND status IN ${LIVE_STATUSES_SQL} AND owner = p_owner;\n` +
      `  IF ROW_COUNT() = 1 THEN COMMIT;\n` +
      `  ELSE SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '${LOST_SIGNAL}';\n` +
      `  END IF;\n` +
      `END`
    );
  return (
    `CREATE PROCEDURE \`${RECORD_AND_COMMIT}\`(IN p_key VARBINARY(764), IN p_mode VARCHAR(6), IN p_owner CHAR(36), IN p_holder VARCHAR(255), ` +
    `IN p_token BIGINT UNSIGNED, IN p_hold_us BIGINT UNSIGNED, IN p_wait_ms INT UNSIGNED, IN p_hold_ms INT UNSIGNED) MODIFIES SQL DATA\n` +
    `BEGIN\n` +
    `  INSERT INTO ${LOCK_LOG_TABLE} (lock_key, mode, owner, holder, strategy, fencing_token, status, lease_ms, acquired_at, expires_at, ended_at, wait_ms, hold_ms, note)\n` +
    `    VALUES (p_key, p_mode, p_owner, p_holder, 'row-lock', p_token, '${LockStatus.RELEASED}', 0, ${NOW} - INTERVAL p_hold_us MICROSECOND, ${NOW}, ${NOW}, p_wait_ms, p_hold_ms, NULL);\n` +
    `  COMMIT;\n` +
    `END`
  );
}

/** Which of the routines the connection's user sees in the current database: rows of `name`. */
export const ROUTINES_PRESENT =
  "SELECT ROUTINE_NAME AS name FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = DATABASE() AND ROUTINE_TYPE = 'PROCEDURE' " +
  `AND ROUTINE_NAME IN (${SESSION_ROUTINES.map((name) => `'${name}'`).join(', ')})`;
