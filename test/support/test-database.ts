import { randomBytes } from 'node:crypto';
import mysql from 'mysql2/promise';
import { DB_LOCK_MIGRATIONS } from '../../lib/index.js';
import { dialectSql, type DialectSql } from './dialect-sql.js';
import { type OpenTransaction, openTransactions } from './open-transactions.js';

/** Server to test against: DB_LOCK_TEST_URL (mysql://user:pass@host:port), else root@127.0.0.1:3306. */
export function serverUrl(): URL {
  return new URL(process.env.DB_LOCK_TEST_URL ?? 'mysql://root@127.0.0.1:3306');
}

/** The kind of database server a URL names: `postgres:`/`postgresql:` URLs are PostgreSQL, the rest MySQL/MariaDB. */
export type DatabaseType = 'mysql' | 'postgres';

export function databaseTypeOf(server: URL): DatabaseType {
  return server.protocol === 'postgres:' || server.protocol === 'postgresql:' ? 'postgres' : 'mysql';
}

export interface ConnectionSettings {
  /** The server's kind: 'postgres' for PostgreSQL, absent for MySQL/MariaDB. */
  type?: DatabaseType;
  host: string;
  port: number;
  user: string;
  password: string;
  database: string;
}

/** Settings for `database` on `server` (default: the server of DB_LOCK_TEST_URL). */
export function connectionSettings(database: string, server: URL = serverUrl()): ConnectionSettings {
  const type = databaseTypeOf(server);
  return {
    // Only PostgreSQL's settings carry it: MySQL's go to mysql2.createConnection as they are, which warns of unknown options.
    ...(type === 'postgres' ? { type } : {}),
    host: server.hostname,
    port: Number(server.port || (type === 'postgres' ? 5432 : 3306)),
    user: decodeURIComponent(server.username || (type === 'postgres' ? 'postgres' : 'root')),
    password: decodeURIComponent(server.password),
    database,
  };
}

export interface TestDatabaseOptions {
  /** false: an empty database, for apps that create the tables with their own migrations. */
  lockTables?: boolean;
  /** The server to create it on (default: the server of DB_LOCK_TEST_URL); a postgres:// URL gives a PostgreSQL database. */
  server?: URL;
}

/**
 * A fresh database for one test file, with the lock tables created by the shipped migration.
 * `drop()` removes it. The name is unique per run, so parallel runs never meet. On a PostgreSQL
 * server it is a PgContractDatabase (same methods, `?` placeholders translated; see there).
 */
export class TestDatabase {
  private readonly sessions: mysql.Connection[] = [];

  protected constructor(
    readonly name: string,
    /** The server it lives on. */
    readonly server: URL,
    private readonly mysqlAdmin?: mysql.Connection,
  ) {}

  /** A fresh database on the server of a contract target. */
  static forTarget(
    target: { readonly serverUrl?: URL },
    prefix = 'dblock',
    options: Omit<TestDatabaseOptions, 'server'> = {},
  ): Promise<TestDatabase> {
    return TestDatabase.create(prefix, { ...options, server: target.serverUrl ?? serverUrl() });
  }

  static async create(prefix = 'dblock', options: TestDatabaseOptions = {}): Promise<TestDatabase> {
    const name = `${prefix}_${process.pid}_${randomBytes(4).toString('hex')}`;
    const server = options.server ?? serverUrl();
    if (databaseTypeOf(server) === 'postgres') {
      const { PgContractDatabase } = await import('./pg-contract-database.js');
      return PgContractDatabase.open(name, server, options.lockTables !== false);
    }
    const settings = connectionSettings(name, server);
    const admin = await mysql.createConnection({ ...settings, database: undefined, multipleStatements: true });
    await admin.query(`CREATE DATABASE \`${name}\``);
    await admin.query(`USE \`${name}\``);
    if (options.lockTables !== false) {
      for (const Migration of DB_LOCK_MIGRATIONS as (new () => { up(runner: unknown): Promise<void> })[]) {
        await new Migration().up({ query: async (sql: string, params?: unknown[]) => (await admin.query(sql, params))[0] } as never);
      }
    }
    return new TestDatabase(name, server, admin);
  }

  /** The admin connection (MySQL only: a PostgreSQL database has none to hand out). */
  get admin(): mysql.Connection {
    if (!this.mysqlAdmin) throw new Error(`TestDatabase.admin: a mysql2 connection, not available on ${this.server.protocol} servers`);
    return this.mysqlAdmin;
  }

  get type(): DatabaseType {
    return databaseTypeOf(this.server);
  }

  get settings(): ConnectionSettings {
    return connectionSettings(this.name, this.server);
  }

  /** The SQL fragments this server writes its own way (see dialect-sql.ts). */
  get sql(): DialectSql {
    return dialectSql(this.type);
  }

  /**
   * Another session's transaction holding the key row of `storedKey` (FOR UPDATE) until the
   * returned function rolls it back: a grant on that key blocks in the server meanwhile.
   */
  async holdKeyRow(storedKey: string): Promise<() => Promise<void>> {
    const session = await mysql.createConnection(this.settings);
    await session.query('START TRANSACTION');
    await session.query('SELECT * FROM db_lock WHERE lock_key = ? FOR UPDATE', [Buffer.from(storedKey)]);
    return async () => {
      await session.query('ROLLBACK');
      await session.end();
    };
  }

  /**
   * A connection of its own to this database, at READ COMMITTED as the library's own sessions are,
   * for playing the library's statements by hand; `drop()` closes it.
   */
  async session(): Promise<mysql.Connection> {
    const connection = await mysql.createConnection(this.settings);
    this.sessions.push(connection);
    await connection.query('SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED');
    return connection;
  }

  /** Runs SQL on the admin connection (in this database). */
  async query<T = Record<string, unknown>[]>(sql: string, values?: unknown[]): Promise<T> {
    const [rows] = await this.admin.query(sql, values);
    return rows as T;
  }

  /**
   * Log rows for a key (namespace included), oldest first, each with `lease_ends_at`: when its
   * lease ends by the server clock (its own expiry, or its process's latest renewal plus its lease).
   * Holds only: the CLAIMED rows a row-lock take writes on a key a lease used are left out (`claimRows`).
   */
  async logRows(storedKey: string): Promise<Record<string, unknown>[]> {
    return this.query(
      `SELECT g.*, GREATEST(g.expires_at, COALESCE(p.renewed_at + INTERVAL g.lease_ms * 1000 MICROSECOND, g.expires_at)) AS lease_ends_at ` +
        `FROM db_lock_log g LEFT JOIN db_lock_process p ON p.id = g.process_id WHERE g.lock_key = ? AND g.status <> 'CLAIMED' ORDER BY g.id`,
      [Buffer.from(storedKey)],
    );
  }

  /** The tokens row-lock takes claimed on a key (CLAIMED rows), oldest first. */
  async claimRows(storedKey: string): Promise<{ fencing_token: number; owner: string }[]> {
    return this.query(`SELECT fencing_token, owner FROM db_lock_log WHERE lock_key = ? AND status = 'CLAIMED' ORDER BY id`, [Buffer.from(storedKey)]);
  }

  /**
   * Sessions of this database (other databases on the shared server left out) with a locking
   * statement on the `db_lock` key rows in flight (the UPDATE, or the locking read): a row-lock
   * waiter blocked in the server. (A waiting UPDATE is not always listed in INNODB_TRX on
   * MariaDB, so the process list is what is read.)
   */
  async lockWaits(): Promise<number> {
    const [row] = await this.query<{ n: number }[]>(
      `SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST WHERE DB = ? AND COMMAND = 'Query' AND ID <> CONNECTION_ID() ` +
        `AND (INFO LIKE '%UPDATE db_lock SET%' OR INFO LIKE '%FROM db_lock WHERE%FOR%')`,
      [this.name],
    );
    return Number(row!.n);
  }

  /** This database's open transactions, fresh at each call (see openTransactions). */
  openTransactions(): Promise<OpenTransaction[]> {
    return openTransactions(this.admin, this.name);
  }

  /** This database's open transactions, read until `done(them)` or `timeoutMs` passes, 50 ms apart; the last reading is returned. */
  async transactionsUntil(done: (them: OpenTransaction[]) => boolean, timeoutMs = 2_000): Promise<OpenTransaction[]> {
    const deadline = performance.now() + timeoutMs;
    let them = await this.openTransactions();
    while (!done(them) && performance.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      them = await this.openTransactions();
    }
    return them;
  }

  /** Waits up to `timeoutMs` for an open transaction of this database that passes `filter`; false if none came. */
  async transactionSeen(filter: (t: OpenTransaction) => boolean, timeoutMs: number): Promise<boolean> {
    return (await this.transactionsUntil((them) => them.some(filter), timeoutMs)).some(filter);
  }

  /** When a process last renewed its lease (server clock), by process lease id. */
  async processRenewedAt(processId: unknown): Promise<Date | undefined> {
    const rows = await this.query<{ renewed_at: Date }[]>(`SELECT renewed_at FROM db_lock_process WHERE id = ?`, [processId]);
    return rows[0]?.renewed_at;
  }

  async drop(): Promise<void> {
    for (const session of this.sessions.splice(0)) await session.end().catch(() => undefined);
    try {
      await this.admin.query(`DROP DATABASE IF EXISTS \`${this.name}\``);
    } finally {
      await this.admin.end();
    }
  }
}

/**
 * A log row as its holder wrote it: without `lease_ends_at`, which `logRows` derives from the
 * holder's process lease as well, and which that process's watchdog moves on its own timer
 * (also for rows already ended), so it says nothing about whether the row itself was written.
 */
export function ownLogRow(row: Record<string, unknown> | undefined): Record<string, unknown> {
  const { lease_ends_at: _derived, ...own } = row ?? {};
  return own;
}
