import mysql from 'mysql2';
import type { Pool, PoolConnection, PoolOptions } from 'mysql2';
import { LockStatementError } from '../lock-statement.error.js';
import type { RoundTripPurpose } from '../lock-store.js';
import { DedicatedConnection } from './dedicated-connection.js';
import { recoverConnection, sendBounded, type StatementDone } from './bounded-statement.js';
import { ANSWER_BOUND_MS } from '../answer-bound.js';
import { KeptConnections } from './kept-connections.js';

export type { RoundTripPurpose };

/** The lock sessions' innodb_lock_wait_timeout, in ms: no statement of theirs waits longer on one row lock. */
export const SESSION_LOCK_WAIT_MS = 1_000;

export { ANSWER_BOUND_MS } from '../answer-bound.js';

export interface QueryOptions {
  readonly purpose: RoundTripPurpose;
  /**
   * performance.now() past which the client stops waiting (Infinity: never; unset: ANSWER_BOUND_MS from now). The connection is
   * then destroyed, never returned mid-statement, and LockStatementError('deadline') thrown:
   * the statement may still finish on the server, so the caller gives back what it may have
   * granted once the server-side bound of that statement has passed. Nothing is ever killed by
   * thread id: behind a proxy or on a cluster that id may belong to someone else.
   */
  readonly deadline?: number;
  /** performance.now() past which no connection is waited for, if sooner than `deadline`: nothing was sent then, so nothing is given back. */
  readonly connectBy?: number;
  /** 'reserved': the watchdog's own connection, so renewals never queue behind grants. */
  readonly lane?: 'shared' | 'reserved';
  /** Told how long the connection took to open when one was opened for this round trip: `deadline` has moved by as much. */
  readonly onOpened?: (ms: number) => void;
}

/** A connection checked out for several dependent round trips (cluster grants, doorbells). */
export interface LockSession {
  query<T = unknown>(sql: string): Promise<T>;
  readonly threadId: number;
}

/**
 * The library's own mysql2 connections, never shared with business code (a business pool drained
 * by REQUIRES_NEW transactions cannot starve grants or renewals): a shared pool and a one-connection
 * renewal lane. Sessions run READ COMMITTED with a one-second row-lock wait.
 */
export class LockConnectionPool {
  private readonly pool: Pool;
  private readonly reserved: Pool;
  private closed = false;
  /** Connections taken from mysql2 and kept between statements. */
  private readonly kept = new KeptConnections(() => this.closed);
  /** Round trips sent to the server since the pool was created, by purpose. */
  readonly roundTrips: Record<RoundTripPurpose, number> = { locks: 0, renewals: 0, janitor: 0, admin: 0 };

  constructor(
    readonly options: PoolOptions,
    sessionSetup: string = LockConnectionPool.DEFAULT_SESSION_SETUP,
  ) {
    this.pool = mysql.createPool(options);
    this.reserved = mysql.createPool({ ...options, connectionLimit: 1 });
    for (const pool of [this.pool, this.reserved]) {
      pool.on('connection', (connection) => {
        connection.query(sessionSetup, (error) => {
          if (error) connection.destroy();
        });
      });
    }
  }

  static readonly DEFAULT_SESSION_SETUP = `SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED; SET SESSION innodb_lock_wait_timeout = ${SESSION_LOCK_WAIT_MS / 1000}; SET SESSION time_zone = '+00:00'`;

  get totalRoundTrips(): number {
    return this.roundTrips.locks + this.roundTrips.renewals + this.roundTrips.janitor + this.roundTrips.admin;
  }

  /**
   * One round trip (one or more statements). A server error inside a transaction batch is
   * followed by ROLLBACK before the connection goes back to the pool (after 1205 the transaction
   * is still open: it must never be committed by a later user of the connection).
   * @throws LockStatementError, whatever went wrong.
   */
  query<T = unknown>(sql: string, options: QueryOptions): Promise<T> {
    return this.queryThen(sql, options, (result) => result as T);
  }

  /**
   * As `query`, with the answer handled in the driver's callback: `parse` maps the result, and
   * `rescue`, if given, a failure (after the connection's recovery) to a result or a later one.
   * Every grant and release goes this way: a handler chained after the query's promise would cost
   * each of them a promise and a microtask hop more on the way to the caller.
   */
  queryThen<R>(
    sql: string,
    options: QueryOptions,
    parse: (result: unknown) => R,
    rescue?: (error: LockStatementError) => R | Promise<R>,
  ): Promise<R> {
    const deadline = options.deadline ?? performance.now() + ANSWER_BOUND_MS;
    const pool = options.lane === 'reserved' ? this.reserved : this.pool;
    const taken = this.kept.take(pool, Math.min(deadline, options.connectBy ?? Infinity));
    // A kept connection: the statement leaves in this very call.
    if (!(taken instanceof Promise)) return this.sendKeeping(pool, taken, sql, deadline, options.purpose, parse, rescue);
    // No connection came: `rescue` handles that failure here (the statement's own, sendKeeping does).
    return taken.then(
      (connection) =>
        this.sendKeeping(pool, connection, sql, deadline + this.kept.openTime(connection, options.onOpened), options.purpose, parse, rescue),
      rescue && ((error: unknown) => rescue(LockStatementError.from(error))),
    );
  }

  /** Runs `fn` with one connection for several dependent round trips; it goes back to the pool after. */
  async session<T>(options: QueryOptions, fn: (session: LockSession) => Promise<T>): Promise<T> {
    const deadline = options.deadline ?? performance.now() + ANSWER_BOUND_MS;
    const connection = await this.kept.take(
      options.lane === 'reserved' ? this.reserved : this.pool,
      Math.min(deadline, options.connectBy ?? Infinity),
    );
    const until = deadline + this.kept.openTime(connection, options.onOpened);
    let inTransaction = false;
    const session: LockSession = {
      threadId: Number(connection.threadId),
      query: <R>(sql: string) => {
        if (/^\s*START TRANSACTION/.test(sql)) inTransaction = true;
        // A batch that ends the transaction ends with it (the batch may begin with anything).
        if (/\b(COMMIT|ROLLBACK)\s*;?\s*$/.test(sql)) inTransaction = false;
        return this.send<R>(connection, sql, until, options.purpose);
      },
    };
    try {
      const result = await fn(session);
      if (inTransaction) await recoverConnection(connection, undefined, true);
      else connection.release();
      return result;
    } catch (error) {
      await recoverConnection(connection, error, inTransaction);
      throw error;
    }
  }

  /**
   * A connection taken out of the pool for as long as the caller needs it (a doorbell held during
   * a hold). The caller must call `release()` or `destroy()` exactly once.
   */
  async acquireDedicated(purpose: RoundTripPurpose, deadline = Infinity, onDone?: () => void): Promise<DedicatedConnection> {
    const connection = await this.kept.take(this.pool, deadline);
    this.kept.openTime(connection); // asked, so that no later taker is told of it
    return new DedicatedConnection(connection, (sql, until) => this.send(connection, sql, until, purpose), onDone);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.kept.releaseAll();
    await Promise.all([this.pool, this.reserved].map((pool) => new Promise<void>((resolve) => pool.end(() => resolve()))));
  }

  /** The connections kept between statements now (diagnostics, tests). */
  get keptConnections(): readonly PoolConnection[] {
    return this.kept.all();
  }

  get isClosed(): boolean {
    return this.closed;
  }

  private countedSend(connection: PoolConnection, sql: string, deadline: number, purpose: RoundTripPurpose, done: StatementDone): void {
    this.roundTrips[purpose]++;
    sendBounded(connection, sql, deadline, done);
  }

  private send<T>(connection: PoolConnection, sql: string, deadline: number, purpose: RoundTripPurpose): Promise<T> {
    return new Promise<T>((resolve, reject) =>
      this.countedSend(connection, sql, deadline, purpose, (error, result) => (error ? reject(error) : resolve(result as T))),
    );
  }

  /** One statement on a connection taken for it: kept after a clean answer, recovered (see recover) before a failure is handled. */
  private sendKeeping<R>(
    pool: Pool,
    connection: PoolConnection,
    sql: string,
    deadline: number,
    purpose: RoundTripPurpose,
    parse: (result: unknown) => R,
    rescue: ((error: LockStatementError) => R | Promise<R>) | undefined,
  ): Promise<R> {
    return new Promise<R>((resolve, reject) =>
      this.countedSend(connection, sql, deadline, purpose, (error, result) => {
        if (!error) {
          this.kept.keep(pool, connection);
          try {
            return resolve(parse(result));
          } catch (parseError) {
            return reject(parseError);
          }
        }
        void recoverConnection(connection, error, /\bSTART TRANSACTION\b/.test(sql)).then(() => {
          if (!rescue) return reject(error);
          try {
            resolve(rescue(error));
          } catch (rescueError) {
            reject(rescueError);
          }
        });
      }),
    );
  }
}
