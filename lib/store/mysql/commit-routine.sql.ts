import { errnoOf } from './errno.js';
import { format, LIVE_STATUSES_SQL, LOCK_LOG_TABLE, LockStatus, msSince, NOW } from './sql.js';

/**
 * A stored procedure that ends one lock's log row and commits, in the one round trip of its CALL:
 * the fence and the COMMIT of a fenced call that ends a single-key lock. A business transaction's
 * connection belongs to the app, which does not enable multi-statement batches on it, so without
 * the procedure the fence and the COMMIT cost a round trip each. If the row is no longer live (the
 * lock was taken over) the procedure raises LOST_SIGNAL instead of committing: nothing is
 * committed and the transaction stays open for the caller to roll back, as after a fence that
 * found fewer rows than it holds. Same statement and ordering argument as endInCommitStatement.
 *
 * Created by a migration (AddFencedCommitRoutine1796947200000); a server without it, or where
 * the app's user may not see it, gets the two round trips. A changed body gets a new name, so an
 * app never calls a body it was not written for.
 */
export const COMMIT_ROUTINE = 'db_lock_end_and_commit_v1';

/** The text of the SIGNAL the routine raises when the row was no longer live. */
export const LOST_SIGNAL = 'nestjs-db-lock: the lock was no longer held at its fenced commit';

/** MySQL/MariaDB error number of a SIGNAL with SQLSTATE '45000'. */
const ER_SIGNAL_EXCEPTION = 1644;

export function createCommitRoutineStatement(): string {
  return (
    `CREATE PROCEDURE \`${COMMIT_ROUTINE}\`(IN p_id BIGINT UNSIGNED, IN p_owner CHAR(36)) MODIFIES SQL DATA\n` +
    `BEGIN\n` +
    `  UPDATE ${LOCK_LOG_TABLE} FORCE INDEX (PRIMARY) SET status = '${LockStatus.RELEASED}', ended_at = ${NOW}, hold_ms = ${msSince('acquired_at')}\n` +
    `    WHERE id = p_id AND status IN ${LIVE_STATUSES_SQL} AND owner = p_owner;\n` +
    `  IF ROW_COUNT() = 1 THEN COMMIT;\n` +
    `  ELSE SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '${LOST_SIGNAL}';\n` +
    `  END IF;\n` +
    `END`
  );
}

/** How many routines of that name the connection's user sees in the current database (0 or 1). */
export const COMMIT_ROUTINE_PRESENT = format(
  'SELECT COUNT(*) AS n FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = DATABASE() AND ROUTINE_NAME = ? AND ROUTINE_TYPE = ?',
  [COMMIT_ROUTINE, 'PROCEDURE'],
);

export function callCommitRoutine(rowId: string, owner: string): string {
  return format(`CALL \`${COMMIT_ROUTINE}\`(?, ?)`, [Number(rowId), owner]);
}

/**
 * The CALL was refused before the routine ran: it was dropped after this process started (1305), or
 * the app's user may not execute it (1370). The transaction is untouched; the fence and COMMIT go
 * apart from then on.
 */
export function isRoutineUnusable(error: unknown): boolean {
  const errno = errnoOf((error as { cause?: unknown } | null)?.cause ?? error);
  return errno === 1305 || errno === 1370;
}

/** The routine found the row no longer live: nothing was committed. */
export function isLostSignal(error: unknown): boolean {
  const cause = (error as { cause?: unknown } | null)?.cause ?? error;
  return errnoOf(cause) === ER_SIGNAL_EXCEPTION && String((cause as { message?: unknown }).message ?? '').includes(LOST_SIGNAL);
}
