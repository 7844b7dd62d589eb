import type { MigrationInterface, QueryRunner } from 'typeorm';
import { classify } from '../store/mysql/errno.js';
import { COMMIT_ROUTINES, createRoutineStatement, ROUTINES_PRESENT } from '../store/mysql/session-routines.sql.js';

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
    const present = new Set(((await queryRunner.query(ROUTINES_PRESENT)) as { name: string }[]).map((row) => row.name));
    for (const routine of COMMIT_ROUTINES) {
      if (present.has(routine)) continue;
      try {
        await queryRunner.query(createRoutineStatement(routine));
      } catch (error) {
        if (!isPrivilegeError(error)) throw error;
      }
    }
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    for (const routine of COMMIT_ROUTINES) await queryRunner.query(`DROP PROCEDURE IF EXISTS \`${routine}\``);
  }
}

/** Access denied to create a routine (TypeORM wraps the driver's error): the optional routines are left out. */
function isPrivilegeError(error: unknown): boolean {
  return classify((error as { driverError?: unknown }).driverError ?? error) === 'denied';
}
