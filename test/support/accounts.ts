import type { LoggerService } from '@nestjs/common';
import { Column, Entity, PrimaryColumn } from 'typeorm';
import type { TestDatabase } from './test-database.js';

/** A business table for fence tests: one row per account, its balance. */
@Entity({ name: 'account' })
export class Account {
  @PrimaryColumn({ type: 'int' })
  id!: number;

  @Column({ type: 'int' })
  balance!: number;
}

/** Creates the `account` table with `ids`, each with balance 100. */
export async function createAccounts(db: TestDatabase, ids: readonly number[]): Promise<void> {
  await db.query(`CREATE TABLE account (id INT PRIMARY KEY, balance INT NOT NULL)${db.sql.tableOptions}`);
  await db.query(`INSERT INTO account (id, balance) VALUES ${ids.map(() => '(?, 100)').join(', ')}`, [...ids]);
}

/** The committed balance, read on the admin connection (so never through any open transaction). */
export async function balanceOf(db: TestDatabase, id: number): Promise<number> {
  const [row] = await db.query<{ balance: number }[]>('SELECT balance FROM account WHERE id = ?', [id]);
  return Number(row?.balance);
}

/** A Nest logger that keeps warnings (to assert on them) and drops the rest, errors excepted. */
export class CapturingLogger implements LoggerService {
  readonly warnings: string[] = [];
  log(): void {}
  error(message: unknown, ...rest: unknown[]): void {
    console.error(message, ...rest);
  }
  warn(message: unknown): void {
    this.warnings.push(String(message));
  }
  debug(): void {}
  verbose(): void {}
  /** Warnings about writes outside a fenced transaction. */
  escaped(): string[] {
    return this.warnings.filter((w) => w.startsWith('Write outside the fenced transaction'));
  }
}
