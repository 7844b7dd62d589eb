import type { QueryRunner } from 'typeorm';
import { classify } from '../store/mysql/errno.js';
import { createRoutineStatement, ROUTINES_PRESENT, type SessionRoutine } from '../store/mysql/session-routines.ddl.js';

/**
 * Creates those of `routines` the database does not have yet (running a migration twice changes
 * nothing). Creating a routine needs the CREATE ROUTINE privilege; without it the routine is left
 * out and the migration still succeeds: the library then sends the routine's statements apart.
 */
export async function installOptionalRoutines(queryRunner: QueryRunner, routines: readonly SessionRoutine[]): Promise<void> {
  const present = new Set(((await queryRunner.query(ROUTINES_PRESENT)) as { name: string }[]).map((row) => row.name));
  for (const routine of routines) {
    if (present.has(routine)) continue;
    try {
      await queryRunner.query(createRoutineStatement(routine));
    } catch (error) {
      // TypeORM wraps the driver's error.
      if (classify((error as { driverError?: unknown }).driverError ?? error) !== 'denied') throw error;
    }
  }
}

export async function dropRoutines(queryRunner: QueryRunner, routines: readonly SessionRoutine[]): Promise<void> {
  for (const routine of routines) await queryRunner.query(`DROP PROCEDURE IF EXISTS \`${routine}\``);
}
