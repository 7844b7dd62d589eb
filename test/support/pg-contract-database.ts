import pg from 'pg';
import type mysql from 'mysql2/promise';
import { DataSource } from 'typeorm';
import { DB_LOCK_ENTITIES, DB_LOCK_MIGRATIONS } from '../../lib/index.js';
import type { OpenTransaction } from './open-transactions.js';
import { portableSql } from './portable-sql.js';
import { TestDatabase, connectionSettings } from './test-database.js';

/**
 * TestDatabase on a PostgreSQL server, for the contract suite's PostgreSQL targets: the same
 * methods, MySQL-style SQL with `?` placeholders translated to `$1..$n` (values such as Buffers
 * for bytea keys pass through), the lock tables made by the shipped migrations. What only MySQL
 * has (a mysql2 session, InnoDB's transaction list) throws with a clear message, or reads
 * PostgreSQL's equivalent where one exists (lockWaits, openTransactions from pg_stat_activity).
 */
export class PgContractDatabase extends TestDatabase {
  private constructor(
    name: string,
    server: URL,
    private readonly root: pg.Client,
    private readonly client: pg.Client,
  ) {
    super(name, server);
  }

  static async open(name: string, server: URL, lockTables: boolean): Promise<PgContractDatabase> {
    const root = new pg.Client(clientConfig(server, 'postgres'));
    await root.connect();
    await root.query(`CREATE DATABASE ${name}`);
    try {
      if (lockTables) {
        const s = connectionSettings(name, server);
        const dataSource = new DataSource({
          type: 'postgres',
          host: s.host,
          port: s.port,
          username: s.user,
          password: s.password,
          database: name,
          entities: DB_LOCK_ENTITIES,
          migrations: DB_LOCK_MIGRATIONS,
          logging: false,
        });
        await dataSource.initialize();
        try {
          await dataSource.runMigrations();
        } finally {
          await dataSource.destroy();
        }
      }
      const client = new pg.Client(clientConfig(server, name));
      await client.connect();
      return new PgContractDatabase(name, server, root, client);
    } catch (error) {
      await root.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch(() => undefined);
      await root.end();
      throw error;
    }
  }

  override async query<T = Record<string, unknown>[]>(sql: string, values?: unknown[]): Promise<T> {
    const result = await this.client.query(portableSql(sql, 'postgres'), values);
    // Statements without result columns answer as mysql2's ResultSetHeader does (affectedRows).
    if (result.fields.length === 0 && result.command !== 'SELECT') return { affectedRows: result.rowCount ?? 0 } as T;
    return result.rows as T;
  }

  override async logRows(storedKey: string): Promise<Record<string, unknown>[]> {
    return this.query(
      `SELECT g.*, GREATEST(g.expires_at, COALESCE(p.renewed_at + g.lease_ms * interval '1 millisecond', g.expires_at)) AS lease_ends_at ` +
        `FROM db_lock_log g LEFT JOIN db_lock_process p ON p.id = g.process_id WHERE g.lock_key = ? AND g.status <> 'CLAIMED' ORDER BY g.id`,
      [Buffer.from(storedKey)],
    );
  }

  /** Sessions of this database blocked on a lock in a statement on the `db_lock` tables (a row-lock waiter in the server). */
  override async lockWaits(): Promise<number> {
    const [row] = await this.query<{ n: string }[]>(
      `SELECT COUNT(*) AS n FROM pg_stat_activity WHERE datname = ? AND pid <> pg_backend_pid() AND wait_event_type = 'Lock' AND query LIKE '%db_lock%'`,
      [this.name],
    );
    return Number(row!.n);
  }

  /** This database's sessions in a transaction (pg_stat_activity); `rowsModified` has no PostgreSQL equivalent and throws. */
  override async openTransactions(): Promise<OpenTransaction[]> {
    const rows = await this.query<{ pid: number; waiting: boolean; query: string }[]>(
      `SELECT pid, wait_event_type = 'Lock' AS waiting, query FROM pg_stat_activity ` +
        `WHERE datname = ? AND pid <> pg_backend_pid() AND xact_start IS NOT NULL`,
      [this.name],
    );
    return rows.map((r) => ({
      threadId: r.pid,
      lockWait: r.waiting === true,
      text: r.query,
      get rowsModified(): number {
        throw new Error('openTransactions: rowsModified is read from InnoDB, it has no PostgreSQL equivalent here');
      },
    }));
  }

  override async holdKeyRow(storedKey: string): Promise<() => Promise<void>> {
    const session = new pg.Client(clientConfig(this.server, this.name));
    await session.connect();
    await session.query('BEGIN');
    await session.query('SELECT * FROM db_lock WHERE lock_key = $1 FOR UPDATE', [Buffer.from(storedKey)]);
    return async () => {
      await session.query('ROLLBACK');
      await session.end();
    };
  }

  override session(): Promise<mysql.Connection> {
    return Promise.reject(new Error('TestDatabase.session() is a mysql2 session: not available on a PostgreSQL database'));
  }

  override async drop(): Promise<void> {
    await this.client.end().catch(() => undefined);
    try {
      await this.root.query(`DROP DATABASE IF EXISTS ${this.name} WITH (FORCE)`);
    } finally {
      await this.root.end();
    }
  }
}

function clientConfig(server: URL, database: string): pg.ClientConfig {
  const s = connectionSettings(database, server);
  return { host: s.host, port: s.port, user: s.user, password: s.password, database };
}
