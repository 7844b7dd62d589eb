import type { RowLockAuditRow } from '../lock-store.js';
import { errnoOf } from './errno.js';
import { BEGIN_AND_TAKE, END_AND_COMMIT, LOST_SIGNAL, RECORD_AND_COMMIT } from './session-routines.ddl.js';
import { escape, rowIdLiteral, sharedKeyLiteral, sqlInteger } from './sql.js';

/**
 * The CALLs of the session routines (their names and bodies: session-routines.ddl.ts, which the
 * migrations install without loading the driver), and what their failures mean.
 */
export * from './session-routines.ddl.js';

/** MySQL/MariaDB error number of a SIGNAL with SQLSTATE '45000'. */
const ER_SIGNAL_EXCEPTION = 1644;

/**
 * The CALL of BEGIN_AND_TAKE for one key (bounded by the caller, see row-lock.sql.ts). This and
 * callRecordAndCommit run on every row-lock hold: they are built by hand from literals, as format()
 * would write them, because a placeholder scan and escaping costs several µs per statement there.
 */
export function callBeginAndTake(key: Buffer): string {
  return `CALL \`${BEGIN_AND_TAKE}\`(${sharedKeyLiteral(key)})`;
}

/** Every lease `@WriteLock` call's fence. */
export function callEndAndCommit(rowId: string, owner: string): string {
  return `CALL \`${END_AND_COMMIT}\`(${rowIdLiteral(rowId)}, ${escape(owner)})`;
}

let lastHolder = { holder: '', literal: "''" };
/** A RELEASED audit row as insertAuditRows writes it (the note is always null for a commit that ends a hold). */
export function callRecordAndCommit(row: RowLockAuditRow, holder: string): string {
  if (holder !== lastHolder.holder) lastHolder = { holder, literal: escape(holder) };
  const numbers = `${sqlInteger(row.fencingToken)}, ${sqlInteger(row.holdMs * 1000)}, ${sqlInteger(row.waitedMs)}, ${sqlInteger(row.holdMs)}`;
  return `CALL \`${RECORD_AND_COMMIT}\`(${sharedKeyLiteral(row.key)}, ${escape(row.mode)}, ${escape(row.owner)}, ${lastHolder.literal}, ${numbers})`;
}

/**
 * The CALL was refused before the routine ran: it was dropped after this process started (1305), or
 * the app's user may not execute it (1370). The transaction is untouched; the end and COMMIT go
 * apart from then on.
 */
export function isRoutineUnusable(error: unknown): boolean {
  const errno = errnoOf((error as { cause?: unknown } | null)?.cause ?? error);
  return errno === 1305 || errno === 1370;
}

/** END_AND_COMMIT found the row no longer live: nothing was committed. */
export function isLostSignal(error: unknown): boolean {
  const cause = (error as { cause?: unknown } | null)?.cause ?? error;
  return errnoOf(cause) === ER_SIGNAL_EXCEPTION && String((cause as { message?: unknown }).message ?? '').includes(LOST_SIGNAL);
}
