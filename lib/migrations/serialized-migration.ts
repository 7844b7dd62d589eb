import type { MigrationInterface, QueryRunner } from 'typeorm';
import { POSTGRES_MIGRATION_LOCK_KEY } from '../store/postgres/schema.sql.js';

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

  /**
   * The step up on PostgreSQL. The first migration creates the whole current schema there (see
   * POSTGRES_TABLES); the later ones are steps of the MySQL history, already in it, so by default
   * they change nothing. A future schema change adds a migration that overrides both.
   */
  protected async applyPostgres(_queryRunner: QueryRunner): Promise<void> {}
  /** The step down on PostgreSQL (nothing by default, as applyPostgres). */
  protected async revertPostgres(_queryRunner: QueryRunner): Promise<void> {}

  /** Runs `apply` under the migration lock (TypeORM's `migration:run`). */
  up(queryRunner: QueryRunner): Promise<void> {
    if (isPostgres(queryRunner)) return underAdvisoryLock(queryRunner, () => this.applyPostgres(queryRunner));
    return underMigrationLock(queryRunner, () => this.apply(queryRunner));
  }

  /** Runs `revert` under the migration lock (TypeORM's `migration:revert`). */
  down(queryRunner: QueryRunner): Promise<void> {
    if (isPostgres(queryRunner)) return underAdvisoryLock(queryRunner, () => this.revertPostgres(queryRunner));
    return underMigrationLock(queryRunner, () => this.revert(queryRunner));
  }
}

/** The runner's DataSource is PostgreSQL (a runner without one, as a hand-made runner, is taken for MySQL). */
function isPostgres(queryRunner: QueryRunner): boolean {
  return (queryRunner as Partial<QueryRunner>).connection?.options.type === 'postgres';
}

/**
 * PostgreSQL: an advisory lock, tried every 100 ms for at most the MySQL path's wait (a blocking
 * `pg_advisory_lock` has no bound of its own). Inside TypeORM's migration transaction (its default)
 * the lock is the transaction's, held until COMMIT: another instance's CREATE … IF NOT EXISTS must
 * not run before this one's tables are committed, or it fails on the catalog's unique index
 * instead of finding them. Without a transaction (`migrationsTransactionMode: 'none'`) every
 * statement commits at once, and a session lock around the step is enough.
 */
async function underAdvisoryLock(queryRunner: QueryRunner, step: () => Promise<void>): Promise<void> {
  const scope = queryRunner.isTransactionActive ? 'xact_' : '';
  const giveUpAt = Date.now() + MIGRATION_LOCK_WAIT_S * 1000;
  for (;;) {
    const [row] = (await queryRunner.query(`SELECT pg_try_advisory_${scope}lock(${POSTGRES_MIGRATION_LOCK_KEY}) AS got`)) as { got: boolean }[];
    if (row?.got === true) break;
    if (Date.now() >= giveUpAt)
      throw new Error(
        `Another session held the advisory lock ${POSTGRES_MIGRATION_LOCK_KEY} (migrating the lock tables) for ${MIGRATION_LOCK_WAIT_S} s`,
      );
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  try {
    await step();
  } finally {
    if (!scope) await queryRunner.query(`SELECT pg_advisory_unlock(${POSTGRES_MIGRATION_LOCK_KEY})`);
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
