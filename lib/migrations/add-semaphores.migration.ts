import type { QueryRunner } from 'typeorm';
import { SerializedMigration } from './serialized-migration.js';
import { LOCK_LOG_TABLE, LOCK_TABLE } from '../store/mysql/sql-text.js';

/** Names of a table's columns in the current database. */
async function columnsOf(queryRunner: QueryRunner, table: string): Promise<Map<string, string>> {
  const rows = (await queryRunner.query(
    `SELECT COLUMN_NAME AS name, COLUMN_TYPE AS type FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?`,
    [table],
  )) as { name: string; type: string }[];
  return new Map(rows.map((row) => [row.name, String(row.type).toLowerCase()]));
}

/**
 * Third schema version, for semaphores (runs after AddProcessLeasesAndRowLocks1795392000000; a
 * shipped migration never changes its schema). Upgrades the tables in place, keeping their rows:
 * - `db_lock` gains `semaphore_limit`: the limit a key's permits are in use with, set by each
 *   permit's grant (NULL for a key only ever locked);
 * - `db_lock_log.mode` widens from 5 to 6 characters for the permits' mode 'permit' (an in-place
 *   change on both servers: the length byte stays one byte).
 * Only what is missing: a table created by TypeORM's `synchronize` already has the new shape.
 */
export class AddSemaphores1795996800000 extends SerializedMigration {
  name = 'AddSemaphores1795996800000';

  protected async apply(queryRunner: QueryRunner): Promise<void> {
    const lockColumns = await columnsOf(queryRunner, LOCK_TABLE);
    if (!lockColumns.has('semaphore_limit'))
      await queryRunner.query(`ALTER TABLE \`${LOCK_TABLE}\` ADD COLUMN \`semaphore_limit\` INT UNSIGNED NULL`);
    const logColumns = await columnsOf(queryRunner, LOCK_LOG_TABLE);
    if (logColumns.get('mode') === 'varchar(5)')
      await queryRunner.query(`ALTER TABLE \`${LOCK_LOG_TABLE}\` MODIFY \`mode\` VARCHAR(6) CHARACTER SET ascii COLLATE ascii_bin NOT NULL`);
  }

  protected async revert(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DELETE FROM \`${LOCK_LOG_TABLE}\` WHERE \`mode\` = 'permit'`);
    await queryRunner.query(`ALTER TABLE \`${LOCK_LOG_TABLE}\` MODIFY \`mode\` VARCHAR(5) CHARACTER SET ascii COLLATE ascii_bin NOT NULL`);
    await queryRunner.query(`ALTER TABLE \`${LOCK_TABLE}\` DROP COLUMN \`semaphore_limit\``);
  }
}
