import type { MigrationInterface, QueryRunner } from 'typeorm';

/** The named lock every step of the library's migrations runs under. */
const MIGRATION_LOCK = 'nestjs_db_lock:migrations';
/** How long a step waits for another process's step, in seconds (the server's unit): index builds on a big log take a while. */
const MIGRATION_LOCK_WAIT_S = 600;

/**
 * A migration of the lock tables whose steps (`apply`, `revert`) run one at a time across
 * processes. TypeORM takes no lock around migrations on MySQL/MariaDB, and apps commonly run them
 * at start-up (`migrationsRun: true`) in every instance: two instances would both find a column
 * missing and both add it, the second failing. Under the database's named lock each step checks
 * what is missing and does only that, so the later instances change nothing.
 */
export abstract class SerializedMigration implements MigrationInterface {
  /** The migration's name, as TypeORM records it in its migrations table (the class name). */
  abstract readonly name: string;

  /** The step up: checks what is missing and adds only that (run under the migration lock). */
  protected abstract apply(queryRunner: QueryRunner): Promise<void>;
  /** The step down: undoes `apply`, only what is there (run under the migration lock). */
  protected abstract revert(queryRunner: QueryRunner): Promise<void>;

  /** Runs `apply` under the migration lock (TypeORM's `migration:run`). */
  up(queryRunner: QueryRunner): Promise<void> {
    return underMigrationLock(queryRunner, () => this.apply(queryRunner));
  }

  /** Runs `revert` under the migration lock (TypeORM's `migration:revert`). */
  down(queryRunner: QueryRunner): Promise<void> {
    return underMigrationLock(queryRunner, () => this.revert(queryRunner));
  }
}

async function underMigrationLock(queryRunner: QueryRunner, step: () => Promise<void>): Promise<void> {
  const [taken] = (await queryRunner.query(`SELECT GET_LOCK(?, ?) AS got`, [MIGRATION_LOCK, MIGRATION_LOCK_WAIT_S])) as {
    got: number | string | null;
  }[];
  if (Number(taken?.got) !== 1)
    throw new Error(`Another process held the named lock '${MIGRATION_LOCK}' (migrating the lock tables) for ${MIGRATION_LOCK_WAIT_S} s`);
  try {
    await step();
  } finally {
    await queryRunner.query(`SELECT RELEASE_LOCK(?)`, [MIGRATION_LOCK]);
  }
}
