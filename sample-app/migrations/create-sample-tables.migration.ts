import type { MigrationInterface, QueryRunner } from 'typeorm';

export class CreateSampleTables1763769600001 implements MigrationInterface {
  name = 'CreateSampleTables1763769600001';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE IF NOT EXISTS sample_loan (
        id INT NOT NULL PRIMARY KEY,
        balance BIGINT NOT NULL,
        repayments INT NOT NULL DEFAULT 0
      ) ENGINE=InnoDB`);
    await queryRunner.query(`INSERT IGNORE INTO sample_loan (id, balance) VALUES (1, 100000), (2, 250000), (3, 5000)`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE IF EXISTS sample_loan`);
  }
}
