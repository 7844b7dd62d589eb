import type { EscapedLockWait } from '../escaped-lock-wait.js';
import { ER_LOCK_WAIT_TIMEOUT, errnoOf } from './errno.js';

/** The escaped write's own lock wait, in seconds (the server's unit): long enough for a busy row, far below innodb_lock_wait_timeout's 50 s default. */
const ESCAPED_LOCK_WAIT_S = 1;

/** MySQL/MariaDB: the session's innodb_lock_wait_timeout, saved in a user variable. */
export const MYSQL_ESCAPED_LOCK_WAIT: EscapedLockWait = {
  bound: `SET @nestjs_db_lock_wait = @@SESSION.innodb_lock_wait_timeout, SESSION innodb_lock_wait_timeout = LEAST(@@SESSION.innodb_lock_wait_timeout, ${ESCAPED_LOCK_WAIT_S})`,
  restore: 'SET SESSION innodb_lock_wait_timeout = @nestjs_db_lock_wait',
  setting: 'innodb_lock_wait_timeout',
  timedOut: (error) => errnoOf(error) === ER_LOCK_WAIT_TIMEOUT,
  // InnoDB keeps the transaction after a lock wait timeout: a restore that failed really failed.
  restoredByRollback: () => false,
};
