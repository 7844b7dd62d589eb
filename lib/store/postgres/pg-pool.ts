import pg from 'pg';
import type { DataSource } from 'typeorm';
import { LockStatementError } from '../lock-statement.error.js';
import type { RoundTripPurpose } from '../lock-store.js';
import { ANSWER_BOUND_MS } from '../answer-bound.js';
import './pg-failures.js';
import { LOCK_WAIT_MS } from './pg-sql.js';
import { PgDedicatedConnection } from './pg-dedicated-connection.js';
import { checkoutBound } from '../../core/connection-opening.js';

/** The library's sessions: READ COMMITTED (a fresh read per statement), a bounded row-lock wait. */
const SESSION_SETUP = `SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL READ COMMITTED; SET lock_timeout = '${LOCK_WAIT_MS}ms'`;

/** Statements a round trip needs prepared on its connection: run in front of it once per connection (see PgLockPool.query). */
export interface PreparedStatements {
  readonly sql: string;
  /** How many statements `sql` holds (their results are left out of the answer). */
  readonly count: number;
}

/** A grant's checkout that its deadline ended: nothing was sent, so nothing is given back. */
export const notSentInTime = (): LockStatementError => LockStatementError.notSent('No lock connection became free before the deadline');

/** pg's own error when a query's `query_timeout` (the round trip's answer bound) ran out. */
const answerTimedOut = (error: unknown): boolean => error instanceof Error && error.message === 'Query read timeout';

/**
 * The answer bound ran out: the client stopped waiting and the server may still run the statement,
 * as on MySQL, where the same bound gives this kind. Not a lost connection: those are sent again
 * (see sendWithRetries), and a statement past its deadline must not be.
 */
const answerDeadline = (error: unknown): LockStatementError =>
  new LockStatementError('deadline', error, 'The lock statement did not answer before the deadline (Query read timeout)');

/** pg's settings for the library's pool, from the DataSource's (as TypeORM builds its own), nothing configured twice. */
export function pgPoolConfig(dataSource: DataSource, max: number): pg.PoolConfig {
  const options = dataSource.options as {
    url?: string;
    host?: string;
    port?: number;
    username?: string;
    password?: string | (() => string | Promise<string>);
    database?: string;
    ssl?: pg.PoolConfig['ssl'];
    connectTimeoutMS?: number;
    extra?: Record<string, unknown>;
    replication?: { master: Record<string, unknown> };
  };
  const credentials = { ...options, ...(options.replication?.master ?? {}) } as typeof options;
  return {
    connectionString: credentials.url,
    host: credentials.host,
    port: credentials.port,
    user: credentials.username,
    password: credentials.password,
    database: credentials.database,
    ssl: credentials.ssl,
    connectionTimeoutMillis: options.connectTimeoutMS,
    ...(options.extra ?? {}),
    application_name: 'nestjs-db-lock',
    max,
  };
}

/**
 * The library's own PostgreSQL connections, never shared with business code: the process lease,
 * first uses of keys, the audit rows of holds that did not commit, the janitor and the admin
 * reads. Every round trip is bounded (ANSWER_BOUND_MS) and counted by purpose.
 */
export class PgLockPool {
  private readonly pool: pg.Pool;
  private closed = false;
  /** Connections whose prepared statements are in place (each after a round trip that made them succeeded). */
  private readonly prepared = new WeakMap<pg.PoolClient, PreparedStatements>();
  /** Clients a failure left unusable (closed when they go back). */
  private readonly broken = new WeakSet<pg.PoolClient>();
  readonly roundTrips: Record<RoundTripPurpose, number> = { locks: 0, renewals: 0, janitor: 0, admin: 0 };

  constructor(config: pg.PoolConfig) {
    this.pool = new pg.Pool(config);
    // An idle client's failure (a restart, a network cut): the pool drops it; the next query says so.
    this.pool.on('error', () => undefined);
    this.pool.on('connect', (client) => {
      client.query(SESSION_SETUP).catch(() => undefined);
    });
  }

  get isClosed(): boolean {
    return this.closed;
  }

  /**
   * One round trip (one or more statements, one result each). A failed batch that opened a
   * transaction is rolled back (see send) before its client goes back to the pool; a client whose answer did
   * not come in time, or whose connection broke, is destroyed, never reused. `prepared`: statements
   * this round trip EXECUTEs, made first on a connection that does not have them yet (in the same
   * round trip; their results left out).
   * @throws LockStatementError, whatever went wrong.
   */
  async query(sql: string, purpose: RoundTripPurpose, answerWithinMs = ANSWER_BOUND_MS, prepared?: PreparedStatements): Promise<pg.QueryResult[]> {
    const { client } = await this.connect(Infinity, notSentInTime);
    // pg's pool stops listening for a client's 'error' while it is checked out, and pg emits one
    // when the connection drops with no word from the server (a network cut, a proxy gone): with
    // no listener that is an uncaught exception, which ends the app. The statement in flight fails
    // with the same error, so the listener only marks the client, which is then closed, not reused.
    const onError = (): void => void this.broken.add(client);
    client.on('error', onError);
    let failure: LockStatementError | undefined;
    try {
      return await this.send(client, sql, purpose, answerWithinMs, prepared);
    } catch (error) {
      failure = error as LockStatementError;
      throw failure;
    } finally {
      client.off('error', onError);
      client.release(failure !== undefined && this.broken.has(client) ? failure : undefined);
    }
  }

  /**
   * A connection kept out of the pool by its user (a doorbell's session, or a grant's round trips),
   * waited for until `deadline` at most, or until OPEN_BOUND_MS when one is opened for it (see
   * connection-opening.ts). Counted in the pool's size, so it leaves fewer for everyone else.
   * `openedMs`: how long it took to open, 0 if it was open already.
   */
  async acquireDedicated(
    deadline: number,
    onDone?: () => void,
    late: () => LockStatementError = () => new LockStatementError('unreachable', new Error('no lock pool connection free in time')),
  ): Promise<{ connection: PgDedicatedConnection; openedMs: number }> {
    const { client, openedMs } = await this.connect(deadline, late);
    const connection = new PgDedicatedConnection(
      client,
      (sql, answerWithinMs, prepared) => this.send(client, sql, 'locks', answerWithinMs, prepared),
      onDone,
      () => this.broken.has(client),
    );
    return { connection, openedMs };
  }

  /** A client by `deadline`, or by OPEN_BOUND_MS when the pool opens one for it; one that comes after the caller gave up goes straight back. */
  private async connect(deadline: number, late: () => LockStatementError): Promise<{ client: pg.PoolClient; openedMs: number }> {
    if (this.closed) throw new LockStatementError('unreachable', new Error('the lock pool is closed'));
    const askedAt = performance.now();
    const { opens, bound } = checkoutBound(this.pool, deadline);
    const connecting = this.pool.connect();
    let timer: NodeJS.Timeout | undefined;
    const timedOut =
      bound === Infinity
        ? undefined
        : new Promise<never>((_, reject) => {
            timer = setTimeout(() => reject(late()), Math.max(0, bound - askedAt));
          });
    try {
      const client = await (timedOut ? Promise.race([connecting, timedOut]) : connecting);
      return { client, openedMs: opens ? performance.now() - askedAt : 0 };
    } catch (error) {
      connecting.then(
        (client) => client.release(),
        () => undefined,
      );
      if (error instanceof LockStatementError) throw error;
      const failure = LockStatementError.from(error);
      failure.sent = false;
      throw failure;
    } finally {
      clearTimeout(timer);
    }
  }

  /** One round trip on `client`, counted; its prepared statements made first where missing; rolled back if it failed. @throws LockStatementError */
  private async send(
    client: pg.PoolClient,
    sql: string,
    purpose: RoundTripPurpose,
    answerWithinMs: number,
    prepared?: PreparedStatements,
  ): Promise<pg.QueryResult[]> {
    this.roundTrips[purpose]++;
    const prepare = prepared !== undefined && this.prepared.get(client) !== prepared ? prepared : undefined;
    try {
      const text = prepare ? `${prepare.sql};\n${sql}` : sql;
      const answer = (await client.query({ text, query_timeout: Math.max(1, Math.ceil(answerWithinMs)) } as pg.QueryConfig)) as
        pg.QueryResult | pg.QueryResult[];
      if (prepare) this.prepared.set(client, prepare);
      const results = Array.isArray(answer) ? answer : [answer];
      return prepare ? results.slice(prepare.count) : results;
    } catch (error) {
      const failure = answerTimedOut(error) ? answerDeadline(error) : LockStatementError.from(error);
      // A broken session is closed by whoever holds it (one past its answer bound may still be
      // running the statement); one that answered is left with no transaction open.
      if (failure.kind === 'connection-lost' || failure.kind === 'deadline' || failure.kind === 'other') this.broken.add(client);
      else await client.query('ROLLBACK').catch(() => this.broken.add(client));
      throw failure;
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.pool.end().catch(() => undefined);
  }
}
