import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The sample's own tables, run by TypeORM next to the library's DB_LOCK_MIGRATIONS (see
 * app.module.ts). Amounts are whole cents in BIGINT: money is never a float.
 *
 * Times are UTC (DEFAULT (UTC_TIMESTAMP(6)), read with TypeORM's `timezone: 'Z'`), like the lock
 * tables', so they compare with the lock log whatever the server's or the session's time zone.
 *
 * Foreign keys keep the data honest; the lock is what keeps it consistent (a repayment and a
 * transfer of the same loan never interleave). Claims have no relation objects in the entities:
 * plain id columns keep the ES-module entities free of import cycles.
 */
export class CreateLendingTables1795392000000 implements MigrationInterface {
  name = 'CreateLendingTables1795392000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    const statements = [
      `CREATE TABLE IF NOT EXISTS p2p_investor (
        id INT NOT NULL PRIMARY KEY,
        name VARCHAR(100) NOT NULL,
        opening_cents BIGINT NOT NULL,
        balance_cents BIGINT NOT NULL
      )`,
      `CREATE TABLE IF NOT EXISTS p2p_loan (
        id INT NOT NULL PRIMARY KEY,
        borrower VARCHAR(100) NOT NULL,
        principal_cents BIGINT NOT NULL,
        outstanding_cents BIGINT NOT NULL,
        repaid_cents BIGINT NOT NULL DEFAULT 0,
        repayments INT NOT NULL DEFAULT 0
      )`,
      `CREATE TABLE IF NOT EXISTS p2p_claim (
        id INT NOT NULL PRIMARY KEY,
        loan_id INT NOT NULL,
        investor_id INT NOT NULL,
        principal_cents BIGINT NOT NULL,
        received_cents BIGINT NOT NULL DEFAULT 0,
        transfers INT NOT NULL DEFAULT 0,
        CONSTRAINT fk_p2p_claim_loan FOREIGN KEY (loan_id) REFERENCES p2p_loan (id),
        CONSTRAINT fk_p2p_claim_investor FOREIGN KEY (investor_id) REFERENCES p2p_investor (id)
      )`,
      `CREATE TABLE IF NOT EXISTS p2p_repayment (
        id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
        loan_id INT NOT NULL,
        cents BIGINT NOT NULL,
        fencing_token BIGINT NOT NULL,
        created_at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
        CONSTRAINT fk_p2p_repayment_loan FOREIGN KEY (loan_id) REFERENCES p2p_loan (id)
      )`,
      `CREATE TABLE IF NOT EXISTS p2p_claim_transfer (
        id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
        claim_id INT NOT NULL,
        loan_id INT NOT NULL,
        from_investor_id INT NOT NULL,
        to_investor_id INT NOT NULL,
        fencing_token BIGINT NOT NULL,
        created_at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
        CONSTRAINT fk_p2p_transfer_claim FOREIGN KEY (claim_id) REFERENCES p2p_claim (id)
      )`,
      `CREATE TABLE IF NOT EXISTS p2p_reconciliation (
        id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
        holder VARCHAR(255) NOT NULL,
        balanced TINYINT(1) NOT NULL,
        paid_out_cents BIGINT NOT NULL,
        repaid_cents BIGINT NOT NULL,
        created_at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6))
      )`,
      // One row per day: the last order number handed out, and the fencing token of the lock
      // holder that wrote it (a stale holder's write is refused, see OrderNumbersService).
      `CREATE TABLE IF NOT EXISTS p2p_order_counter (
        day CHAR(8) NOT NULL PRIMARY KEY,
        last_value INT NOT NULL,
        fencing_token BIGINT NOT NULL
      )`,
      `CREATE TABLE IF NOT EXISTS p2p_order (
        id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
        order_number VARCHAR(32) NOT NULL,
        fencing_token BIGINT NOT NULL,
        created_at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
        UNIQUE KEY uq_p2p_order_number (order_number)
      )`,
    ];
    for (const sql of statements) await queryRunner.query(`${sql} ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    for (const table of ['p2p_order', 'p2p_order_counter', 'p2p_reconciliation', 'p2p_claim_transfer', 'p2p_repayment', 'p2p_claim', 'p2p_loan', 'p2p_investor'])
      await queryRunner.query(`DROP TABLE IF EXISTS ${table}`);
  }
}
