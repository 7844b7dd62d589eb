import type { QueryRunner } from 'typeorm';
import { SerializedMigration } from './serialized-migration.js';
import { LIVE_KEY_INDEX, liveKeyIndexDdl } from '../store/postgres/schema.sql.js';

/**
 * Ninth schema version (runs after DropLogGrantTimeIndex1798761600000; a shipped migration never
 * changes its schema). On PostgreSQL `db_lock_log` gains a partial index of its live rows by key
 * (LIVE_KEY_INDEX: why, in schema.sql.ts); a database created by an earlier version lacks it,
 * one created now has it from the first migration. Outside a migration transaction
 * (`migrationsTransactionMode: 'none'`) it is built CONCURRENTLY: grants and releases go on
 * meanwhile. Inside one it is a plain build, which holds the log's writes until it ends (0.2 s for
 * a million log rows on our test machine; a grant's lock wait is bounded to a second and retried,
 * so callers wait a little longer). Locks held during the upgrade are
 * untouched either way. MySQL and MariaDB have no partial indexes, and InnoDB's purge removes the
 * old entries of ended holds within moments, so there it changes nothing.
 */
export class AddLiveHolderIndex1799366400000 extends SerializedMigration {
  name = 'AddLiveHolderIndex1799366400000';

  protected async apply(): Promise<void> {}

  protected async revert(): Promise<void> {}

  protected override async applyPostgres(queryRunner: QueryRunner): Promise<void> {
    const concurrently = !queryRunner.isTransactionActive;
    // A concurrent build that failed leaves an invalid index behind, which IF NOT EXISTS would keep.
    const [found] = (await queryRunner.query(
      `SELECT i.indisvalid AS valid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname = $1 AND pg_table_is_visible(c.oid)`,
      [LIVE_KEY_INDEX],
    )) as { valid: boolean }[];
    if (found?.valid === true) return;
    if (found) await queryRunner.query(`DROP INDEX ${concurrently ? 'CONCURRENTLY ' : ''}IF EXISTS ${LIVE_KEY_INDEX}`);
    await queryRunner.query(liveKeyIndexDdl(concurrently));
  }

  protected override async revertPostgres(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP INDEX ${queryRunner.isTransactionActive ? '' : 'CONCURRENTLY '}IF EXISTS ${LIVE_KEY_INDEX}`);
  }
}
