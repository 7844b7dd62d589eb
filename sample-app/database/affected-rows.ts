/**
 * How many rows an UPDATE run with `EntityManager.query` changed. TypeORM hands back each
 * driver's own answer: mysql2's result header (`{ affectedRows }`) on MySQL/MariaDB, and
 * `[rows, rowCount]` on PostgreSQL.
 */
export function affectedRows(result: unknown): number {
  if (Array.isArray(result)) return Number(result[1]);
  return Number((result as { affectedRows: number }).affectedRows);
}
