import type { QueryRunner } from 'typeorm';
import { SerializedMigration } from './serialized-migration.js';
import { LOCK_LOG_TABLE, PROCESS_TABLE, ROW_LOCK_TABLE } from '../store/tables.js';

/**
 * Second schema version (runs after CreateDbLockTables1763769600000; never edit a shipped
 * migration, add a new one):
 * - `db_lock_process`: one process-lease row per running process. Holders point to it, so renewing
 *   every lock a process holds is one single-row UPDATE however many locks it holds.
 * - `db_lock_row_lock`: the rows whose InnoDB locks the row-lock strategy's holders keep.
 * - `db_lock_log` gains `process_id`, `strategy` and `fenced_count`; its indexes shrink to the
 *   three the protocol reads through, so ending a hold updates two secondary indexes instead of five.
 * Plain SQL that MySQL 8+ and MariaDB 10.6+ both accept; the index changes run online.
 */
/** Column or index names of the log table in the current database. */
async function names(queryRunner: QueryRunner, view: 'COLUMNS' | 'STATISTICS', column: string): Promise<Set<string>> {
  const rows = (await queryRunner.query(
    `SELECT ${column} AS name FROM information_schema.${view} WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?`,
    [LOCK_LOG_TABLE],
  )) as { name: string }[];
  return new Set(rows.map((row) => row.name));
}

/** Second migration: process leases (one renewal row per process), the row-lock table and the log columns they need. Run after CreateDbLockTables1763769600000. */
export class AddProcessLeasesAndRowLocks1795392000000 extends SerializedMigration {
  name = 'AddProcessLeasesAndRowLocks1795392000000';

  protected async apply(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE IF NOT EXISTS \`${PROCESS_TABLE}\` (
        \`id\` BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
        \`holder\` VARCHAR(255) NOT NULL,
        \`started_at\` DATETIME(6) NOT NULL,
        \`renewed_at\` DATETIME(6) NOT NULL,
        \`ended_count\` BIGINT UNSIGNED NOT NULL DEFAULT 0,
        PRIMARY KEY (\`id\`)
      ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`);
    await queryRunner.query(`
      CREATE TABLE IF NOT EXISTS \`${ROW_LOCK_TABLE}\` (
        \`lock_key\` VARBINARY(764) NOT NULL,
        PRIMARY KEY (\`lock_key\`)
      ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`);
    // Only what is missing or left over: a table created by TypeORM's `synchronize` from the
    // current entities already has the new shape. (MySQL has no IF [NOT] EXISTS for these clauses.)
    const columns = await names(queryRunner, 'COLUMNS', 'COLUMN_NAME');
    const indexes = await names(queryRunner, 'STATISTICS', 'INDEX_NAME');
    const changes = [
      !columns.has('process_id') && 'ADD COLUMN `process_id` BIGINT UNSIGNED NULL',
      !columns.has('strategy') && "ADD COLUMN `strategy` VARCHAR(8) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT 'lease'",
      !columns.has('fenced_count') && 'ADD COLUMN `fenced_count` INT UNSIGNED NOT NULL DEFAULT 0',
      !indexes.has('idx_db_lock_log_status_process') && 'ADD INDEX `idx_db_lock_log_status_process` (`status`, `process_id`)',
      !indexes.has('idx_db_lock_log_acquired') && 'ADD INDEX `idx_db_lock_log_acquired` (`acquired_at`)',
      ...['idx_db_lock_log_status_expires', 'idx_db_lock_log_owner_status', 'idx_db_lock_log_ended'].map(
        (index) => indexes.has(index) && `DROP INDEX \`${index}\``,
      ),
    ].filter((change): change is string => typeof change === 'string');
    if (changes.length > 0) await queryRunner.query(`ALTER TABLE \`${LOCK_LOG_TABLE}\` ${changes.join(', ')}`);
  }

  protected async revert(queryRunner: QueryRunner): Promise<void> {
    // Rows only the row-lock strategy writes (its audit rows, claims): without the strategy column they
    // would read as lease rows sharing tokens, which the token-claims migration refuses on the way up again.
    await queryRunner.query(`DELETE FROM \`${LOCK_LOG_TABLE}\` WHERE \`strategy\` = 'row-lock' OR \`status\` = 'CLAIMED'`);
    await queryRunner.query(`
      ALTER TABLE \`${LOCK_LOG_TABLE}\`
        ADD INDEX \`idx_db_lock_log_status_expires\` (\`status\`, \`expires_at\`),
        ADD INDEX \`idx_db_lock_log_owner_status\` (\`owner\`, \`status\`),
        ADD INDEX \`idx_db_lock_log_ended\` (\`ended_at\`),
        DROP INDEX \`idx_db_lock_log_status_process\`,
        DROP INDEX \`idx_db_lock_log_acquired\`,
        DROP COLUMN \`fenced_count\`,
        DROP COLUMN \`strategy\`,
        DROP COLUMN \`process_id\``);
    await queryRunner.query(`DROP TABLE IF EXISTS \`${ROW_LOCK_TABLE}\``);
    await queryRunner.query(`DROP TABLE IF EXISTS \`${PROCESS_TABLE}\``);
  }
}
