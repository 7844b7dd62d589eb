import type { MigrationInterface, QueryRunner } from 'typeorm';
import { COMMIT_ROUTINES } from '../store/mysql/session-routines.sql.js';
import { dropRoutines, installOptionalRoutines } from './optional-routines.js';

/**
 * Fifth schema version (runs after AddRowLockFastPath1796342400000; a shipped migration is never
 * edited). Adds the stored procedures that end a decorated call's hold and commit its transaction in
 * one round trip (see session-routines.sql.ts). No table changes: locks held during the upgrade are
 * untouched, and processes that started before it keep the two round trips until they restart.
 *
 * Creating a routine needs the CREATE ROUTINE privilege. Without it the migration leaves the
 * routines out and succeeds: the library then runs as before (the end and the COMMIT apart).
 */
export class AddCommitRoutines1796947200000 implements MigrationInterface {
  name = 'AddCommitRoutines1796947200000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await installOptionalRoutines(queryRunner, COMMIT_ROUTINES);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await dropRoutines(queryRunner, COMMIT_ROUTINES);
  }
}
