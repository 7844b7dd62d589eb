import type { QueryRunner } from 'typeorm';
import { SerializedMigration } from './serialized-migration.js';
import { LOCK_TABLE } from '../store/mysql/sql-text.js';

/**
 * Fourth schema version (runs after AddSemaphores1795996800000; a shipped migration never changes
 * its schema). `db_lock` gains `no_lease_holders`: 1 while the key's latest grant was a row-lock
 * writer's, so no lease holder of the key can be live and a row-lock takes the key in one UPDATE
 * without reading the log. Every lease grant sets it back to 0 in its own commit.
 *
 * Upgrading in place: the column is added with its default 0 ("the log must be read"), an instant
 * change on MariaDB >= 10.3 and MySQL >= 8.0.12 that keeps every row. Locks held meanwhile are
 * untouched: lease holders do not read the column, and a row-lock on a key with 0 takes the rare
 * path (it reads the log, as before the upgrade) and sets it to 1.
 */
export class AddRowLockFastPath1796342400000 extends SerializedMigration {
  name = 'AddRowLockFastPath1796342400000';

  protected async apply(queryRunner: QueryRunner): Promise<void> {
    const rows = (await queryRunner.query(
      `SELECT COLUMN_NAME AS name FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND COLUMN_NAME = 'no_lease_holders'`,
      [LOCK_TABLE],
    )) as unknown[];
    // Only what is missing: a table created by TypeORM's `synchronize` already has the column.
    if (rows.length === 0) await queryRunner.query(`ALTER TABLE \`${LOCK_TABLE}\` ADD COLUMN \`no_lease_holders\` TINYINT NOT NULL DEFAULT 0`);
  }

  protected async revert(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE \`${LOCK_TABLE}\` DROP COLUMN \`no_lease_holders\``);
  }
}
