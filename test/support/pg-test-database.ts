import { randomBytes } from 'node:crypto';
import { connect } from 'node:net';
import pg from 'pg';
import { DataSource, type DataSourceOptions } from 'typeorm';
import { DB_LOCK_ENTITIES, DB_LOCK_MIGRATIONS } from '../../lib/index.js';

/** PostgreSQL server to test against: DB_LOCK_TEST_PG_URL (postgres://user:pass@host:port), else postgres@127.0.0.1:5432. */
export function pgServerUrl(): URL {
  return new URL(process.env.DB_LOCK_TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432');
}

/**
 * Whether the PostgreSQL tests run: always when DB_LOCK_TEST_PG_URL is set (`.ci/run` sets it, so an
 * unreachable server fails there), else only when a server answers on the default address, so that
 * `npm test` on a machine with MySQL only still runs everything else.
 */
export async function pgTestsRun(): Promise<boolean> {
  if (process.env.DB_LOCK_TEST_PG_URL) return true;
  const url = pgServerUrl();
  return new Promise((resolve) => {
    const socket = connect(Number(url.port || 5432), url.hostname);
    const done = (answered: boolean) => {
      socket.destroy();
      resolve(answered);
    };
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
    socket.setTimeout(1000, () => done(false));
  });
}

/**
 * A fresh PostgreSQL database for one test file, created empty; `drop()` removes it (ending the
 * sessions still in it). The name is unique per run, so parallel runs never meet.
 */
export class PgTestDatabase {
  private readonly dataSources: DataSource[] = [];

  private constructor(
    readonly name: string,
    private readonly admin: pg.Client,
  ) {}

  static async create(prefix = 'dblock_pg'): Promise<PgTestDatabase> {
    const name = `${prefix}_${process.pid}_${randomBytes(4).toString('hex')}`;
    const admin = new pg.Client({ connectionString: urlFor('postgres') });
    await admin.connect();
    await admin.query(`CREATE DATABASE ${name}`);
    return new PgTestDatabase(name, admin);
  }

  /** postgres:// URL of this database. */
  get url(): string {
    return urlFor(this.name);
  }

  /** TypeORM options for this database, with the library's entities and migrations. */
  options(extra: Partial<DataSourceOptions> = {}): DataSourceOptions {
    return {
      type: 'postgres',
      url: urlFor(this.name),
      entities: DB_LOCK_ENTITIES,
      migrations: DB_LOCK_MIGRATIONS,
      logging: false,
      ...extra,
    } as DataSourceOptions;
  }

  /** An initialized DataSource on this database; `drop()` destroys it. */
  async dataSource(extra: Partial<DataSourceOptions> = {}): Promise<DataSource> {
    const dataSource = new DataSource(this.options(extra));
    this.dataSources.push(dataSource);
    return dataSource.initialize();
  }

  /** Runs SQL on a session of this database; the rows. */
  async query<T = Record<string, unknown>>(sql: string, values?: unknown[]): Promise<T[]> {
    const client = new pg.Client({ connectionString: urlFor(this.name) });
    await client.connect();
    try {
      return (await client.query(sql, values)).rows as T[];
    } finally {
      await client.end();
    }
  }

  async drop(): Promise<void> {
    for (const dataSource of this.dataSources.splice(0)) if (dataSource.isInitialized) await dataSource.destroy().catch(() => undefined);
    try {
      await this.admin.query(`DROP DATABASE IF EXISTS ${this.name} WITH (FORCE)`);
    } finally {
      await this.admin.end();
    }
  }
}

function urlFor(database: string): string {
  const url = pgServerUrl();
  url.pathname = `/${database}`;
  return url.toString();
}
