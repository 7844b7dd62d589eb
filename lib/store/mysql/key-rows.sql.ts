import { format, LOCK_TABLE } from './sql.js';
import type { StatementPlan } from './statement-plan.js';

/**
 * Creates missing key rows, in their own committed transaction (never on the path of a grant that
 * found its rows). A key row created after the janitor reaped it starts from the fencing floor
 * (read with a shared lock: the reap takes it exclusively), so a key's tokens never go back.
 */
export function createKeyRowsPlan(keys: readonly Buffer[], floorKey: Buffer, sharedLockClause: string, rowLockTable: string): StatementPlan<void> {
  return {
    statements: [
      'START TRANSACTION',
      ...createKeyRowsStatements(keys, floorKey, sharedLockClause),
      // The table of an earlier row-lock design, kept filled for processes still running it.
      format(
        `INSERT IGNORE INTO ${rowLockTable} (lock_key) SELECT k FROM (${keys.map(() => 'SELECT ? AS k').join(' UNION ALL ')}) AS wanted ` +
          `WHERE k NOT IN (SELECT lock_key FROM ${rowLockTable} WHERE lock_key IN (?))`,
        [...keys, keys],
      ),
      'COMMIT',
    ],
    parse: () => undefined,
  };
}

/** The floor's read and the insert of the rows still missing, inside a transaction the caller has open. */
export function createKeyRowsStatements(keys: readonly Buffer[], floorKey: Buffer, sharedLockClause: string): string[] {
  return [
    format(`SELECT COALESCE(MAX(fencing_token), 0) INTO @dbl_floor FROM ${LOCK_TABLE} WHERE lock_key = ? ${sharedLockClause}`, [floorKey]),
    // Only rows that do not exist yet: a row-lock holder keeps its key's row locked for its whole
    // hold, and an insert of an existing key would wait for it (its duplicate check locks the
    // row). At READ COMMITTED the NOT IN subquery is a plain read.
    format(
      `INSERT IGNORE INTO ${LOCK_TABLE} (lock_key, fencing_token) SELECT k, @dbl_floor FROM (${keys.map(() => 'SELECT ? AS k').join(' UNION ALL ')}) AS wanted ` +
        `WHERE k NOT IN (SELECT lock_key FROM ${LOCK_TABLE} WHERE lock_key IN (?))`,
      [...keys, keys],
    ),
  ];
}
