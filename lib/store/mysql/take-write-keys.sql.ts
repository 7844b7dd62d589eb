import { LOCK_TABLE, NOW } from './sql-text.js';

/**
 * The row-lock writers' locking UPDATE of the rows `where` selects (see row-lock.sql.ts's
 * takeWriteKeys): each token bumped and the grant stamped; `single`: one row, its new token in
 * LAST_INSERT_ID. Also the begin-and-take routine's body, which the migrations build: kept apart
 * from the statement builders so that they do so without loading mysql2.
 */
export function takeWriteKeysWhere(where: string, single: boolean, checked = false): string {
  const bump = single ? 'LAST_INSERT_ID(fencing_token + 1)' : 'fencing_token + 1';
  return (
    `UPDATE ${LOCK_TABLE} SET fencing_token = ${bump}, last_granted_at = ${NOW}${checked ? ', no_lease_holders = 1' : ''} ` +
    `WHERE ${where}${checked ? '' : ' AND no_lease_holders = 1'}`
  );
}
