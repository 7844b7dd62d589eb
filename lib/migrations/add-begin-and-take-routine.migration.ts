import type { MigrationInterface, QueryRunner } from 'typeorm';
import { classify } from '../store/mysql/errno.js';
import { BEGIN_AND_TAKE, createRoutineStatement, ROUTINES_PRESENT } from '../store/mysql/session-routines.sql.js';

/**
 * Sixth schema version (runs after AddCommitRoutines1796947200000; a shipped migration is never
 * edited). Adds the stored procedure that opens a row-lock hold's transaction and takes its key in
 * one round trip (see session-routines.sql.ts). No table changes: locks held during the upgrade are
 * untouched, and processes that started before it keep the separate START until they restart.
 *
 * Creating a routine needs the CREATE ROUTINE privilege. Without it the migration leaves the
 * routine out and succeeds: the library then runs as before.
 */
export class AddBeginAndTakeRoutine1797552000000 implements MigrationInterface {
  name = 'AddBeginAndTakeRoutine1797552000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    const present = ((await queryRunner.query(ROUTINES_PRESENT)) as { name: string }[]).some((row) => row.name === BEGIN_AND_TAKE);
    if (present) return;
    try {
      await queryRunner.query(createRoutineStatement(BEGIN_AND_TAKE));
    } catch (error) {
      if (classify((error as { driverError?: unknown }).driverError ?? error) !== 'denied') throw error;
    }
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP PROCEDURE IF EXISTS \`${BEGIN_AND_TAKE}\``);
  }
}
