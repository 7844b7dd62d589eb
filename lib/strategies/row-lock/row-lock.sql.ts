import type { LockTarget } from '../../core/lock-key.js';
import type { ServerFlavor } from '../../mysql/server-flavor.js';
import { format, ROW_LOCK_TABLE } from '../../mysql/sql.js';

/**
 * The locking read that IS the row-lock: InnoDB row locks on the keys' rows of db_lock_row_lock,
 * in key order (the same in every process), exclusive for write keys and shared for read keys,
 * kept until the transaction ends. The rows exist before (created in their own committed
 * statement), so at READ COMMITTED the read locks exactly them and never a gap.
 *
 * How long it may wait, bounded on the server (never by killing a thread id, which behind a
 * proxy or on a cluster may be someone else's):
 * - one try: NOWAIT;
 * - a budget: MariaDB `SET STATEMENT max_statement_time = s FOR …` (fractional seconds, so
 *   sub-second timeouts hold although innodb_lock_wait_timeout counts whole seconds); MySQL the
 *   `MAX_EXECUTION_TIME(ms)` hint, which interrupts a locking read's wait as well;
 * - forever: the session's innodb_lock_wait_timeout ends each wait, and the wait queue asks again.
 */
export function lockRowsStatements(targets: readonly LockTarget[], flavor: ServerFlavor, waitMs: number): { sql: string; rows: number }[] {
  const groups: { keys: Buffer[]; clause: string }[] = [];
  const writeKeys = targets.filter((t) => t.mode === 'write').map((t) => t.bytes);
  const readKeys = targets.filter((t) => t.mode === 'read').map((t) => t.bytes);
  if (writeKeys.length > 0) groups.push({ keys: writeKeys, clause: 'FOR UPDATE' });
  if (readKeys.length > 0) groups.push({ keys: readKeys, clause: flavor.sharedLockClause });
  // Write keys first, then read keys, each in key order: every process locks in this same order.
  return groups.map(({ keys, clause }) => {
    const select = (hint: string) => format(`SELECT ${hint}lock_key FROM ${ROW_LOCK_TABLE} WHERE lock_key IN (?) ORDER BY lock_key ${clause}`, [keys]);
    const rows = keys.length;
    if (waitMs <= 0) return { sql: `${select('')} NOWAIT`, rows };
    if (waitMs === Infinity) return { sql: select(''), rows };
    if (flavor.statementTimeLimit) return { sql: `SET STATEMENT max_statement_time = ${(Math.max(1, Math.ceil(waitMs)) / 1000).toFixed(3)} FOR ${select('')}`, rows };
    return { sql: select(`/*+ MAX_EXECUTION_TIME(${Math.max(1, Math.ceil(waitMs))}) */ `), rows };
  });
}
