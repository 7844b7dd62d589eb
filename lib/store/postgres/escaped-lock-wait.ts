import type { EscapedLockWait } from '../escaped-lock-wait.js';

/** The escaped write's own lock wait, in ms (lock_timeout's unit): long enough for a busy row; PostgreSQL waits for ever by default. */
const ESCAPED_LOCK_WAIT_MS = 1_000;
/** The custom setting holding the session's own lock_timeout meanwhile. */
const SAVED = 'nestjs_db_lock.escaped_lock_wait';

/** A server error's SQLSTATE (the pg driver's DatabaseError has a severity), read without loading the driver. */
const sqlState = (error: unknown): string | undefined => {
  const e = error as { code?: unknown; severity?: unknown } | null;
  return typeof e?.code === 'string' && typeof e.severity === 'string' ? e.code : undefined;
};

/**
 * PostgreSQL: the session's lock_timeout (0, its default, waits for ever), in ms as pg_settings
 * reports it. A SET inside a transaction that then fails is undone by its rollback, and the restore
 * sent in the failed transaction is refused (25P02): the rollback restored it.
 */
export const POSTGRES_ESCAPED_LOCK_WAIT: EscapedLockWait = {
  bound:
    `SELECT set_config('${SAVED}', s.setting, false), set_config('lock_timeout', CASE WHEN s.setting::bigint = 0 OR s.setting::bigint > ${ESCAPED_LOCK_WAIT_MS} ` +
    `THEN '${ESCAPED_LOCK_WAIT_MS}' ELSE s.setting END, false) FROM pg_settings s WHERE s.name = 'lock_timeout'`,
  restore: `SELECT set_config('lock_timeout', current_setting('${SAVED}'), false)`,
  setting: 'lock_timeout',
  timedOut: (error) => sqlState(error) === '55P03',
  restoredByRollback: (error) => sqlState(error) === '25P02',
};
