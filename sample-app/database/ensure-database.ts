import mysql from 'mysql2/promise';
import { databaseName, serverOptions } from '../config/sample-config.js';

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
    if (options.recreate) await connection.query(`DROP DATABASE IF EXISTS \`${name}\``);
    await connection.query(`CREATE DATABASE IF NOT EXISTS \`${name}\``);
  } finally {
    await connection.end();
  }
}

/** A connection to the server of `url`, or DatabaseUnreachableError saying how to get one. */
export async function connectServer(url: URL): Promise<mysql.Connection> {
  try {
    return await mysql.createConnection({ ...serverOptions(url), connectTimeout: 3_000 });
  } catch (error) {
    if (isConnectionFailure(error)) throw new DatabaseUnreachableError(url, error as Error);
    throw error;
  }
}

/** The server did not answer, or refused us: the one startup failure users can fix themselves. */
export class DatabaseUnreachableError extends Error {
  override name = 'DatabaseUnreachableError';

  constructor(
    readonly url: URL,
    cause: Error,
  ) {
    const { host, port, user } = serverOptions(url);
    super(`Cannot connect to a MySQL/MariaDB server at ${host}:${port} as '${user}': ${cause.message}`, { cause });
  }

  /** What to type to get a database, for the npm script the user ran (`sample` or `demo`). */
  help(script: string): string {
    const dockerUrl = new URL(this.url.href);
    dockerUrl.username = 'root';
    dockerUrl.password = 'root';
    dockerUrl.hostname = '127.0.0.1';
    dockerUrl.port = '3308'; // docker-compose.yml maps the mariadb service to 3308 (mysql: 3307)
    const refused = String((this.cause as { code?: unknown }).code).startsWith('ER_ACCESS_DENIED');
    return [
      this.message,
      ...(refused ? ['A server answers there but refused these credentials: fix user:password in DB_LOCK_SAMPLE_URL, or use Docker.'] : []),
      '',
      'Start MariaDB with Docker, from the repository root (give it ~10 s; `docker compose ps` shows it healthy):',
      '  docker compose up -d mariadb',
      'then run again against it:',
      `  DB_LOCK_SAMPLE_URL=${dockerUrl.href} npm run ${script}`,
      '',
      'Or point DB_LOCK_SAMPLE_URL at a server you already run: mysql://user:password@host:port/database',
    ].join('\n');
  }
}

const CONNECTION_FAILURES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ER_ACCESS_DENIED_ERROR',
  'ER_ACCESS_DENIED_NO_PASSWORD_ERROR',
]);

function isConnectionFailure(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && CONNECTION_FAILURES.has(code);
}
