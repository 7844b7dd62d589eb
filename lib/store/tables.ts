/** Table names, the same in every store: the entities and the migrations are declared against them. */
export const LOCK_TABLE = 'db_lock';
export const LOCK_LOG_TABLE = 'db_lock_log';
export const PROCESS_TABLE = 'db_lock_process';
export const ROW_LOCK_TABLE = 'db_lock_row_lock';
