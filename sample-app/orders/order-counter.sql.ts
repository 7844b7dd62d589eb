import type { DatabaseKind } from '../database/database-kind.js';

/*
 * The two statements of OrderNumbersService that MySQL/MariaDB and PostgreSQL spell differently;
 * the others are the same SQL on both (TypeORM's `sql` tag writes each driver's placeholders).
 */

/** Today on the database server's clock, in UTC, as `YYYYMMDD`: instances with skewed clocks agree. */
export const TODAY_SQL: Readonly<Record<DatabaseKind, string>> = {
  mysql: `SELECT DATE_FORMAT(UTC_TIMESTAMP(), '%Y%m%d') AS day`,
  postgres: `SELECT to_char(now() AT TIME ZONE 'UTC', 'YYYYMMDD') AS day`,
};

/** Creates the day's counter at 0 unless it exists: a no-op, not an error, when it does. */
export const CREATE_COUNTER_SQL: Readonly<Record<DatabaseKind, string>> = {
  mysql: 'INSERT IGNORE INTO p2p_order_counter (day, last_value, fencing_token) VALUES (?, 0, 0)',
  postgres: 'INSERT INTO p2p_order_counter (day, last_value, fencing_token) VALUES ($1, 0, 0) ON CONFLICT (day) DO NOTHING',
};
