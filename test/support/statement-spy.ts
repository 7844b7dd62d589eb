import mysql from 'mysql2';
import type { DataSource } from 'typeorm';

type Query = (this: { _pool?: unknown }, sql: unknown, ...rest: unknown[]) => unknown;
const SPIES = Symbol.for('nestjs-db-lock.test.statement-spies');

/**
 * Every statement sent on `dataSource`'s own pool connections, as mysql2 sends it: TypeORM's and
 * the library's (which sends its row-lock and fence statements straight to mysql2, past TypeORM's
 * logger). The library's own pool is left out (`stats().roundTripsBy` counts it).
 */
export function spyOnDataSourceStatements(dataSource: DataSource): { readonly sent: string[] } {
  const pool = (dataSource.driver as unknown as { pool?: unknown }).pool;
  const prototype = (mysql as unknown as { Connection: { prototype: Record<PropertyKey, unknown> } }).Connection.prototype;
  let spies = prototype[SPIES] as Map<unknown, string[]> | undefined;
  if (!spies) {
    const registry = new Map<unknown, string[]>();
    spies = registry;
    const original = prototype.query as Query;
    prototype[SPIES] = registry;
    prototype.query = function (this: { _pool?: unknown }, sql: unknown, ...rest: unknown[]) {
      registry.get(this._pool)?.push(typeof sql === 'string' ? sql : String((sql as { sql?: string }).sql));
      return original.call(this, sql, ...rest);
    } as Query;
  }
  let sent = spies.get(pool);
  if (!sent) spies.set(pool, (sent = []));
  return { sent };
}

/**
 * The statements in `sent` from `from` on, as their first words (`CALL` with its routine's name,
 * `INSERT INTO` with its table). A bounded wait rides in the statement itself (MariaDB's
 * `SET STATEMENT … FOR` prefix, left out here): still one statement.
 */
export function statementShapes(sent: readonly string[], from = 0): string[] {
  return sent.slice(from).map((sql) =>
    sql
      .replace(/^SET STATEMENT .*? FOR /s, '')
      .replace(/^CALL `(\w+)`\(.*$/s, 'CALL $1')
      .replace(/^(SET TRANSACTION ISOLATION LEVEL \S+ \S+|CALL \w+|\S+( INTO \S+)?).*$/s, '$1'),
  );
}
