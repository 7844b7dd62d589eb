import type { EntityManager } from 'typeorm';
import { runSql } from '../../support/portable-sql.js';
import type { TestDatabase } from '../../support/test-database.js';

/**
 * The business table of the decorator tests: who wrote under which key, in the order written. A
 * write that rolled back leaves no entry, so the entries of a key are what committed.
 */
export async function createEntries(db: TestDatabase): Promise<void> {
  await db.query(`CREATE TABLE entries (id ${db.sql.autoId}, k VARCHAR(64) NOT NULL, who VARCHAR(32) NOT NULL)${db.sql.tableOptions}`);
}

/** Writes an entry through `manager` (the locked call's transaction). */
export const insert = (manager: EntityManager, k: string, who: string): Promise<unknown> =>
  runSql(manager, 'INSERT INTO entries (k, who) VALUES (?, ?)', [k, who]);

/** Who wrote under `k`, in order, as committed. */
export async function entriesOf(db: TestDatabase, k: string): Promise<string[]> {
  return (await db.query<{ who: string }[]>('SELECT who FROM entries WHERE k = ? ORDER BY id', [k])).map((r) => r.who);
}

/** What business code throws, told apart from the library's errors. */
export class BusinessError extends Error {}
