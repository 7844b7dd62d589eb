import type { QueryRunner } from 'typeorm';
import { SerializedMigration } from './serialized-migration.js';
import { COMMIT_ROUTINES } from '../store/mysql/session-routines.ddl.js';
import { dropRoutines, installOptionalRoutines } from './optional-routines.js';

/**
 * Fifth schema version (runs after AddRowLockFastPath1796342400000; a shipped migration never changes
 * its schema). Adds the stored procedures that end a decorated call's hold and commit its transaction in
 * one round trip (see session-routines.sql.ts). No table changes: locks held during the upgrade are
 * untouched, and processes that started before it keep the two round trips until they restart.
 *
 * Creating a routine needs the CREATE ROUTINE privilege. Without it the migration leaves the
 * routines out and succeeds: the library then runs as before (the end and the COMMIT apart).
 */
export class AddCommitRoutines1796947200000 extends SerializedMigration {
  name = 'AddCommitRoutines1796947200000';

  protected async apply(queryRunner: QueryRunner): Promise<void> {
    await installOptionalRoutines(queryRunner, COMMIT_ROUTINES);
  }

  protected async revert(queryRunner: QueryRunner): Promise<void> {
    await dropRoutines(queryRunner, COMMIT_ROUTINES);
  }
}
