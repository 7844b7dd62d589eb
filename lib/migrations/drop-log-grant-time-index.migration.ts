import type { QueryRunner } from 'typeorm';
import { SerializedMigration } from './serialized-migration.js';
import { LOCK_LOG_TABLE } from '../store/mysql/sql-text.js';

const GRANT_TIME_INDEX = 'idx_db_lock_log_acquired';

/**
 * Eighth schema version (runs after AddTokenClaims1798156800000; a shipped migration never changes
 * its schema). `db_lock_log` loses its index on the grant time. Only the janitor's prune read it, and
 * it now walks the primary key, whose ids follow grant time; every lease grant and every row-lock
 * audit row paid for it at insert, about a twentieth of an uncontended hold. Dropping an index is
 * online and touches no row: locks held during the upgrade are untouched. A process started before
 * it still prunes by grant time, without the index: slower batches, the same rows.
 */
export class DropLogGrantTimeIndex1798761600000 extends SerializedMigration {
  name = 'DropLogGrantTimeIndex1798761600000';

  protected async apply(queryRunner: QueryRunner): Promise<void> {
    if (await hasIndex(queryRunner)) await queryRunner.query(`ALTER TABLE \`${LOCK_LOG_TABLE}\` DROP INDEX \`${GRANT_TIME_INDEX}\``);
  }

  protected async revert(queryRunner: QueryRunner): Promise<void> {
    if (!(await hasIndex(queryRunner)))
      await queryRunner.query(`ALTER TABLE \`${LOCK_LOG_TABLE}\` ADD INDEX \`${GRANT_TIME_INDEX}\` (\`acquired_at\`)`);
  }
}

async function hasIndex(queryRunner: QueryRunner): Promise<boolean> {
  const found = (await queryRunner.query(
    `SELECT COUNT(*) AS n FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND INDEX_NAME = ?`,
    [LOCK_LOG_TABLE, GRANT_TIME_INDEX],
  )) as { n: number | string }[];
  return Number(found[0]?.n ?? 0) > 0;
}
