import type { QueryRunner } from 'typeorm';
import { SerializedMigration } from './serialized-migration.js';
import { LOCK_LOG_TABLE, LOCK_TABLE } from '../store/tables.js';
import { DROP_POSTGRES_TABLES, POSTGRES_TABLES } from '../store/postgres/schema.sql.js';

/**
 * Creates the first two lock tables (the second migration adds the rest). Add it to your DataSource's `migrations` (the DB_LOCK_MIGRATIONS
 * list) and run migrations as usual. Plain SQL that MySQL 8+ and MariaDB 10.6+ both accept. On
 * PostgreSQL it creates every lock table in today's shape at once (POSTGRES_TABLES), and the later
 * migrations change nothing there.
 */
export class CreateDbLockTables1763769600000 extends SerializedMigration {
  name = 'CreateDbLockTables1763769600000';

  protected async apply(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE IF NOT EXISTS \`${LOCK_TABLE}\` (
        \`lock_key\` VARBINARY(764) NOT NULL,
        \`fencing_token\` BIGINT UNSIGNED NOT NULL DEFAULT 0,
        \`writer_waiting_until\` DATETIME(6) NULL,
        \`last_granted_at\` DATETIME(6) NULL,
        PRIMARY KEY (\`lock_key\`)
      ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`);
    await queryRunner.query(`
      CREATE TABLE IF NOT EXISTS \`${LOCK_LOG_TABLE}\` (
        \`id\` BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
        \`lock_key\` VARBINARY(764) NOT NULL,
        \`mode\` VARCHAR(5) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
        \`owner\` CHAR(36) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
        \`holder\` VARCHAR(255) NOT NULL,
        \`fencing_token\` BIGINT UNSIGNED NOT NULL,
        \`status\` VARCHAR(10) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
        \`lease_ms\` INT UNSIGNED NOT NULL,
        \`acquired_at\` DATETIME(6) NOT NULL,
        \`expires_at\` DATETIME(6) NOT NULL,
        \`ended_at\` DATETIME(6) NULL,
        \`wait_ms\` INT UNSIGNED NOT NULL DEFAULT 0,
        \`hold_ms\` INT UNSIGNED NULL,
        \`note\` VARCHAR(255) NULL,
        PRIMARY KEY (\`id\`),
        INDEX \`idx_db_lock_log_key_status\` (\`lock_key\`, \`status\`, \`expires_at\`),
        INDEX \`idx_db_lock_log_status_expires\` (\`status\`, \`expires_at\`),
        INDEX \`idx_db_lock_log_owner_status\` (\`owner\`, \`status\`),
        INDEX \`idx_db_lock_log_ended\` (\`ended_at\`)
      ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`);
  }

  protected override async applyPostgres(queryRunner: QueryRunner): Promise<void> {
    for (const statement of POSTGRES_TABLES) await queryRunner.query(statement);
  }

  protected override async revertPostgres(queryRunner: QueryRunner): Promise<void> {
    for (const statement of DROP_POSTGRES_TABLES) await queryRunner.query(statement);
  }

  protected async revert(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE IF EXISTS \`${LOCK_LOG_TABLE}\``);
    await queryRunner.query(`DROP TABLE IF EXISTS \`${LOCK_TABLE}\``);
  }
}
