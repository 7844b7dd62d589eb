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
export interface LockRowsStatement {
  /** Rows it must lock (all of them, or the key rows are missing). */
  readonly rows: number;
  /** The statement, bounded by what is left of the caller's budget when it is sent (ms; 0 one try, Infinity none). */
  sql(waitMs: number): string;
}

export function lockRowsStatements(targets: readonly LockTarget[], flavor: ServerFlavor): LockRowsStatement[] {
  // Keys in the one global order (targets come sorted), each run of same-mode keys in one
  // statement: every process takes every key in the same order, whatever the modes, so two
  // multi-key requests never deadlock on each other ([A read, B write] and [A, B] both lock A first).
  const groups: { keys: Buffer[]; clause: string }[] = [];
  for (const target of targets) {
    const clause = target.mode === 'write' ? 'FOR UPDATE' : flavor.sharedLockClause;
    const last = groups[groups.length - 1];
    if (last && last.clause === clause) last.keys.push(target.bytes);
    else groups.push({ keys: [target.bytes], clause });
  }
  return groups.map(({ keys, clause }) => {
    const select = (hint: string) =>
      format(`SELECT ${hint}lock_key FROM ${ROW_LOCK_TABLE} WHERE lock_key IN (?) ORDER BY lock_key ${clause}`, [keys]);
    return {
      rows: keys.length,
      sql: (waitMs: number) => {
        if (waitMs <= 0) return `${select('')} NOWAIT`;
        if (waitMs === Infinity) return select('');
        const ms = Math.max(1, Math.ceil(waitMs));
        if (flavor.statementTimeLimit) return `SET STATEMENT max_statement_time = ${(ms / 1000).toFixed(3)} FOR ${select('')}`;
        return select(`/*+ MAX_EXECUTION_TIME(${ms}) */ `);
      },
    };
  });
}
