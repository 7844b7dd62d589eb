import { MYSQL_ESCAPED_LOCK_WAIT } from './mysql/escaped-lock-wait.js';
import { POSTGRES_ESCAPED_LOCK_WAIT } from './postgres/escaped-lock-wait.js';

/**
 * How the escaped-write guard bounds the lock wait of a write sent outside a fenced transaction on
 * another connection (see EscapedWriteGuard): a session setting lowered for it and put back after,
 * and how its timeout reads. Per database; no driver is loaded.
 */
export interface EscapedLockWait {
  /** Saves the session's own lock wait and lowers it to the bound (one second, or less if it was less). */
  readonly bound: string;
  /** Puts the saved value back. */
  readonly restore: string;
  /** The setting, for messages. */
  readonly setting: string;
  /** The write's failure was its lock wait running out. */
  timedOut(error: unknown): boolean;
  /** The restore failed only because the transaction it ran in had already failed: its rollback puts the setting back. */
  restoredByRollback(error: unknown): boolean;
}

/** The escaped lock wait of a DataSource of type `type`. */
export function escapedLockWaitOf(type: string): EscapedLockWait {
  return type === 'postgres' ? POSTGRES_ESCAPED_LOCK_WAIT : MYSQL_ESCAPED_LOCK_WAIT;
}
