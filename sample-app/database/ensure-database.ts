import mysql from 'mysql2/promise';
import pg from 'pg';
import { databaseName, serverOptions } from '../config/sample-config.js';
import { kindOfUrl } from './database-kind.js';
import { DatabaseUnreachableError, isConnectionFailure } from './database-unreachable.error.js';

export { DatabaseUnreachableError } from './database-unreachable.error.js';

/** A plain driver connection, outside TypeORM: mysql2's or pg's. Both close with `end()`. */
export type DriverConnection = mysql.Connection | pg.Client;

/**
 * Connects to the server of `url` (no database selected) and creates the URL's database if it
 * does not exist, so a fresh clone needs no setup. `recreate` drops it first (the demo starts
 * from a clean database on every run).
 * @throws DatabaseUnreachableError when no server answers or it refuses the credentials.
 */
export async function ensureDatabase(url: URL, options: { recreate?: boolean } = {}): Promise<void> {
  const name = databaseName(url); // checked by readSampleConfig: letters, digits, '_' only
  const connection = await connectServer(url);
  try {
    if (connection instanceof pg.Client) await ensurePostgresDatabase(connection, name, options.recreate ?? false);
    else {
      if (options.recreate) await connection.query(`DROP DATABASE IF EXISTS \`${name}\``);
      await connection.query(`CREATE DATABASE IF NOT EXISTS \`${name}\``);
    }
  } finally {
    await connection.end();
  }
}

/**
 * PostgreSQL has no CREATE DATABASE IF NOT EXISTS, and CREATE DATABASE cannot run inside a
 * transaction (pg's `query` outside BEGIN is fine): look in pg_database first. The name is
 * double-quoted so that its case is kept, as the drivers use it when they connect.
 */
async function ensurePostgresDatabase(client: pg.Client, name: string, recreate: boolean): Promise<void> {
  // FORCE (PostgreSQL 13+) ends sessions still connected, e.g. instances of an interrupted demo
  // run; without it the drop fails while any session uses the database.
  if (recreate) await client.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
  const existing = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
  if (existing.rowCount !== 0) return;
  try {
    await client.query(`CREATE DATABASE "${name}"`);
  } catch (error) {
    // Another process created it between our look and our CREATE: that is what we wanted.
    const code = (error as { code?: unknown }).code;
    if (code !== '42P04' && code !== '23505') throw error; // duplicate_database, or its catalog row
  }
}

/** A connection to the server of `url`, or DatabaseUnreachableError saying how to get one. */
export function connectServer(url: URL): Promise<DriverConnection> {
  // PostgreSQL always connects to some database: `postgres` is there on every server.
  return connect(url, kindOfUrl(url) === 'postgres' ? 'postgres' : undefined);
}

/** A connection to the URL's database itself (the demo reads its results through one). */
export function connectDatabase(url: URL): Promise<DriverConnection> {
  return connect(url, databaseName(url));
}

async function connect(url: URL, database: string | undefined): Promise<DriverConnection> {
  const { host, port, user, password } = serverOptions(url);
  try {
    if (kindOfUrl(url) === 'mysql') return await mysql.createConnection({ host, port, user, password, database, connectTimeout: 3_000 });
    const client = new pg.Client({ host, port, user, password, database, connectionTimeoutMillis: 3_000 });
    await client.connect();
    return client;
  } catch (error) {
    if (isConnectionFailure(error)) throw new DatabaseUnreachableError(url, error as Error);
    throw error;
  }
}
