import type { QueryRunner } from 'typeorm';
import { SerializedMigration } from './serialized-migration.js';
import { BEGIN_AND_TAKE } from '../store/mysql/session-routines.ddl.js';
import { dropRoutines, installOptionalRoutines } from './optional-routines.js';

/**
 * Sixth schema version (runs after AddCommitRoutines1796947200000; a shipped migration never changes
 * its schema). Adds the stored procedure that opens a row-lock hold's transaction and takes its key in
 * one round trip (see session-routines.sql.ts). No table changes: locks held during the upgrade are
 * untouched, and processes that started before it keep the separate START until they restart.
 *
 * Creating a routine needs the CREATE ROUTINE privilege. Without it the migration leaves the
 * routine out and succeeds: the library then runs as before.
 */
export class AddBeginAndTakeRoutine1797552000000 extends SerializedMigration {
  name = 'AddBeginAndTakeRoutine1797552000000';

  protected async apply(queryRunner: QueryRunner): Promise<void> {
    await installOptionalRoutines(queryRunner, [BEGIN_AND_TAKE]);
  }

  protected async revert(queryRunner: QueryRunner): Promise<void> {
    await dropRoutines(queryRunner, [BEGIN_AND_TAKE]);
  }
}
