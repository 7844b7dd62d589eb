import { type DatabaseKind, kindOfUrl, URL_SCHEMES } from '../database/database-kind.js';

/**
 * The sample's settings, read once from the environment and checked before anything starts:
 * a typo in PORT or the URL is reported in one line instead of surfacing later as a strange
 * connection error.
 *
 * | variable             | default                                      |
 * |----------------------|----------------------------------------------|
 * | `PORT`               | `3000`                                       |
 * | `DB_LOCK_SAMPLE_URL` | `mysql://root@127.0.0.1:3306/dblock_sample`  |
 * | `LOCK_TIMEOUT_MS`    | `5000` (how long a request waits for a lock) |
 *
 * The URL's scheme picks the database: `mysql://` or `mariadb://` for MySQL/MariaDB,
 * `postgres://` or `postgresql://` for PostgreSQL.
 */
export interface SampleConfig {
  readonly port: number;
  /** Server, credentials and database name. The database is created if missing. */
  readonly databaseUrl: URL;
  /** The lock module's default `timeoutMs`: a request waits this long for a lock, then 423. */
  readonly lockTimeoutMs: number;
}

export const DEFAULT_DATABASE_URL = 'mysql://root@127.0.0.1:3306/dblock_sample';

/** A setting that cannot be used; `main.ts` prints the message and exits 1. */
export class SampleConfigError extends Error {
  override name = 'SampleConfigError';
}

export function readSampleConfig(env: NodeJS.ProcessEnv = process.env): SampleConfig {
  const databaseUrl = parseDatabaseUrl(env.DB_LOCK_SAMPLE_URL ?? DEFAULT_DATABASE_URL);
  return Object.freeze({
    port: integer('PORT', env.PORT, 3000, 0, 65_535),
    databaseUrl,
    lockTimeoutMs: integer('LOCK_TIMEOUT_MS', env.LOCK_TIMEOUT_MS, 5_000, 0, 600_000),
  });
}

/** Each server's usual port and superuser, for a URL that leaves them out. */
const SERVER_DEFAULTS: Readonly<Record<DatabaseKind, { port: number; user: string }>> = {
  mysql: { port: 3306, user: 'root' },
  postgres: { port: 5432, user: 'postgres' },
};

/** Driver settings (mysql2 or pg) for the server of the URL, no database selected. */
export function serverOptions(url: URL) {
  const defaults = SERVER_DEFAULTS[kindOfUrl(url)];
  return {
    host: url.hostname,
    port: Number(url.port || defaults.port),
    user: decodeURIComponent(url.username || defaults.user),
    password: decodeURIComponent(url.password),
  };
}

/** Driver settings for the URL's database. */
export function connectionOptions(url: URL) {
  return { ...serverOptions(url), database: databaseName(url) };
}

/** The database part of the URL (`/dblock_sample` -> `dblock_sample`). */
export function databaseName(url: URL): string {
  return decodeURIComponent(url.pathname.replace(/^\//, '')) || 'dblock_sample';
}

function parseDatabaseUrl(text: string): URL {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new SampleConfigError(`DB_LOCK_SAMPLE_URL is not a URL: '${text}' (expected mysql://user:password@host:port/database)`);
  }
  if (!URL_SCHEMES[url.protocol]) {
    const schemes = Object.keys(URL_SCHEMES).map((scheme) => `${scheme}//`);
    throw new SampleConfigError(`DB_LOCK_SAMPLE_URL must start with one of ${schemes.join(', ')}, got '${url.protocol}//'`);
  }
  // The name goes into CREATE DATABASE unescaped by any driver: allow only plain identifiers,
  // no longer than the server keeps (PostgreSQL would cut a longer name to 63 bytes silently).
  const maxLength = kindOfUrl(url) === 'postgres' ? 63 : 64;
  if (!new RegExp(`^[A-Za-z0-9_]{1,${maxLength}}$`).test(databaseName(url)))
    throw new SampleConfigError(`the database name in DB_LOCK_SAMPLE_URL must be 1-${maxLength} letters, digits or '_', got '${databaseName(url)}'`);
  return url;
}

function integer(name: string, text: string | undefined, fallback: number, min: number, max: number): number {
  if (text === undefined || text === '') return fallback;
  const value = Number(text);
  if (!/^\d+$/.test(text) || value < min || value > max)
    throw new SampleConfigError(`${name} must be a whole number from ${min} to ${max}, got '${text}'`);
  return value;
}
