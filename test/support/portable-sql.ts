import type { DatabaseType } from './test-database.js';

/**
 * MySQL-style SQL for the server at hand: `?` placeholders become `$1..$n` and backquoted names
 * double-quoted on PostgreSQL (outside string literals and quoted names); MySQL SQL is returned as is.
 * Only the placeholders and quoting are translated: functions and types are the caller's to pick.
 */
export function portableSql(sql: string, type: DatabaseType | undefined): string {
  if (type !== 'postgres') return sql;
  let out = '';
  let n = 0;
  let quote: string | undefined;
  for (const ch of sql) {
    if (quote) {
      out += ch === '`' && quote === '`' ? '"' : ch;
      if (ch === quote) quote = undefined;
    } else if (ch === "'" || ch === '"' || ch === '`') {
      quote = ch;
      out += ch === '`' ? '"' : ch;
    } else out += ch === '?' ? `$${++n}` : ch;
  }
  return out;
}

/** Something with TypeORM's `query`: a DataSource (its options) or an EntityManager (its dataSource). */
export interface Queryable {
  query(sql: string, parameters?: unknown[]): Promise<unknown>;
  readonly options?: { readonly type: string };
  readonly dataSource?: { readonly options: { readonly type: string } };
}

/** The kind of server a DataSource or an EntityManager talks to. */
export function typeOfQueryable(queryable: Queryable): DatabaseType {
  return (queryable.options ?? queryable.dataSource?.options)?.type === 'postgres' ? 'postgres' : 'mysql';
}

/**
 * Runs MySQL-style SQL (`?` placeholders) through TypeORM's `query` on either server. For
 * statements without result columns it answers `{ affectedRows }` on both servers (TypeORM
 * answers `[rows, count]` for PostgreSQL UPDATE/DELETE and a ResultSetHeader for MySQL).
 */
export async function runSql<T = unknown>(queryable: Queryable, sql: string, parameters?: unknown[]): Promise<T> {
  const type = typeOfQueryable(queryable);
  const result = await queryable.query(portableSql(sql, type), parameters);
  if (type === 'postgres' && Array.isArray(result) && result.length === 2 && Array.isArray(result[0]) && typeof result[1] === 'number') {
    return { affectedRows: result[1] } as T;
  }
  return result as T;
}
