import type { QueryRunner } from 'typeorm';
import { SerializedMigration } from './serialized-migration.js';
import { CLAIM_INDEX, LOCK_LOG_TABLE, LOCK_TABLE, TOKEN_CLAIM_EXPRESSION } from '../store/mysql/sql-text.js';

/**
 * Seventh schema version (runs after AddBeginAndTakeRoutine1797552000000; a shipped migration never
 * changes its schema). `db_lock_log` gains `token_claim`, a virtual column, and a unique index on
 * `(lock_key, token_claim)`: a lease grant of a key its process knows free is then one INSERT that
 * claims the key's next token, refused by a duplicate when anyone was granted since. Both changes
 * are online (a virtual column is metadata; the index is built without blocking writes). Locks held
 * during the upgrade are untouched; processes that started before it keep today's grant until they
 * restart, and a process only uses the one-INSERT grant once it sees the index.
 */
export class AddTokenClaims1798156800000 extends SerializedMigration {
  name = 'AddTokenClaims1798156800000';

  protected async apply(queryRunner: QueryRunner): Promise<void> {
    const present = (await queryRunner.query(
      `SELECT COUNT(*) AS n FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND INDEX_NAME = ?`,
      [LOCK_LOG_TABLE, CLAIM_INDEX],
    )) as { n: number | string }[];
    if (Number(present[0]?.n ?? 0) > 0) return;
    const duplicates = (await queryRunner.query(
      `SELECT HEX(lock_key) AS k, fencing_token AS t FROM \`${LOCK_LOG_TABLE}\` WHERE NOT (strategy = 'row-lock' AND status <> 'CLAIMED') ` +
        `GROUP BY lock_key, fencing_token HAVING COUNT(*) > 1 LIMIT 5`,
    )) as { k: string; t: string }[];
    if (duplicates.length > 0)
      throw new Error(
        `${LOCK_LOG_TABLE} has lease rows sharing a key's fencing token (${duplicates.map((d) => `0x${d.k}:${d.t}`).join(', ')}), ` +
          'which no version of this library writes: inspect them before upgrading.',
      );
    // Checked apart from the index: DDL does not roll back, so a run stopped between the two left the column alone.
    const column = (await queryRunner.query(
      `SELECT COUNT(*) AS n FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND COLUMN_NAME = 'token_claim'`,
      [LOCK_LOG_TABLE],
    )) as { n: number | string }[];
    if (Number(column[0]?.n ?? 0) === 0)
      await queryRunner.query(`ALTER TABLE \`${LOCK_LOG_TABLE}\` ADD COLUMN \`token_claim\` BIGINT AS (${TOKEN_CLAIM_EXPRESSION}) VIRTUAL`);
    await queryRunner.query(`ALTER TABLE \`${LOCK_LOG_TABLE}\` ADD UNIQUE INDEX \`${CLAIM_INDEX}\` (\`lock_key\`, \`token_claim\`)`);
  }

  protected async revert(queryRunner: QueryRunner): Promise<void> {
    // One-INSERT grants never wrote the key rows: lifted above every claim first, or the grant without
    // claims (`fencing_token + 1`) would hand out a token again.
    await queryRunner.query(
      `UPDATE \`${LOCK_TABLE}\` k JOIN (SELECT lock_key, MAX(token_claim) AS m FROM \`${LOCK_LOG_TABLE}\` GROUP BY lock_key) c ON c.lock_key = k.lock_key ` +
        `SET k.fencing_token = c.m WHERE c.m > k.fencing_token`,
    );
    await queryRunner.query(`ALTER TABLE \`${LOCK_LOG_TABLE}\` DROP INDEX \`${CLAIM_INDEX}\``);
    await queryRunner.query(`ALTER TABLE \`${LOCK_LOG_TABLE}\` DROP COLUMN \`token_claim\``);
  }
}
