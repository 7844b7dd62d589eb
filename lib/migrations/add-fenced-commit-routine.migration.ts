import type { MigrationInterface, QueryRunner } from 'typeorm';
import { COMMIT_ROUTINE, COMMIT_ROUTINE_PRESENT, createCommitRoutineStatement } from '../store/mysql/commit-routine.sql.js';

/**
 * Fifth schema version (runs after AddRowLockFastPath1796342400000; a shipped migration is never
 * edited). Adds the stored procedure that ends a fenced call's lock and commits in one round trip
 * (see commit-routine.sql.ts). No table changes: locks held during the upgrade are untouched, and
 * processes that started before it keep the two round trips until they restart.
 *
 * Creating a routine needs the CREATE ROUTINE privilege. Without it the migration leaves the
 * routine out and succeeds: the library then runs as before (the fence and the COMMIT apart).
 */
export class AddFencedCommitRoutine1796947200000 implements MigrationInterface {
  name = 'AddFencedCommitRoutine1796947200000';

  async up(queryRunner: QueryRunner): Promise<void> {
    const [present] = (await queryRunner.query(COMMIT_ROUTINE_PRESENT)) as { n: number | string }[];
    if (Number(present?.n ?? 0) > 0) return;
    try {
      await queryRunner.query(createCommitRoutineStatement());
    } catch (error) {
      if (!isPrivilegeError(error)) throw error;
    }
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP PROCEDURE IF EXISTS \`${COMMIT_ROUTINE}\``);
  }
}

/** Access denied to create the routine (1044, 1142, 1227, 1370): the optional routine is left out. */
function isPrivilegeError(error: unknown): boolean {
  const errno = (error as { errno?: number; driverError?: { errno?: number } }).driverError?.errno ?? (error as { errno?: number }).errno;
  return errno === 1044 || errno === 1142 || errno === 1227 || errno === 1370;
}
