import mysql from 'mysql2/promise';
import pg from 'pg';
import { portableSql } from './portable-sql.js';
import type { ConnectionSettings } from './test-database.js';

/**
 * A connection of its own to a test database, outside TypeORM and the library, on either server
 * (mysql2 or pg by `settings.type`): for holding rows in a transaction of another session, or for a
 * worker's statements by hand. SQL is MySQL-style (`?` placeholders, see portable-sql.ts); a
 * statement without result columns answers `{ affectedRows }` on both servers.
 */
export interface RawSession {
  query<T = Record<string, unknown>[]>(sql: string, values?: unknown[]): Promise<T>;
  begin(): Promise<void>;
  commit(): Promise<void>;
  rollback(): Promise<void>;
  end(): Promise<void>;
}

export async function rawSession(settings: ConnectionSettings): Promise<RawSession> {
  if (settings.type === 'postgres') {
    const { host, port, user, password, database } = settings;
    const client = new pg.Client({ host, port, user, password, database });
    await client.connect();
    const query = async <T>(sql: string, values?: unknown[]): Promise<T> => {
      const result = await client.query(portableSql(sql, 'postgres'), values);
      return (result.fields.length === 0 && result.command !== 'SELECT' ? { affectedRows: result.rowCount ?? 0 } : result.rows) as T;
    };
    return {
      query,
      begin: async () => void (await client.query('BEGIN')),
      commit: async () => void (await client.query('COMMIT')),
      rollback: async () => void (await client.query('ROLLBACK')),
      end: () => client.end(),
    };
  }
  const connection = await mysql.createConnection({ ...settings });
  return {
    query: async <T>(sql: string, values?: unknown[]) => (await connection.query(sql, values))[0] as T,
    begin: () => connection.beginTransaction(),
    commit: () => connection.commit(),
    rollback: () => connection.rollback(),
    end: () => connection.end(),
  };
}
