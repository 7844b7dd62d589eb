import mysql from 'mysql2';
import type { Pool, PoolConnection, PoolOptions } from 'mysql2';
import { DbLockError } from '../errors/db-lock.error.js';

/** MySQL/MariaDB error numbers the lock protocol treats as "try again". */
export const ER_LOCK_WAIT_TIMEOUT = 1205;
export const ER_LOCK_DEADLOCK = 1213;
/**
 * "Failed to read auto-increment value from storage engine": what InnoDB reports when a grant's
 * INSERT ... SELECT into db_lock_log waited longer than innodb_lock_wait_timeout for the table's
 * AUTO-INC lock (innodb_autoinc_lock_mode 1 takes it for a whole bulk insert). A lock-wait timeout
 * in all but name: only the statement failed.
 */
export const ER_AUTOINC_READ_FAILED = 1467;

/** A statement whose outcome is unknown: the connection died or was killed mid-flight. */
export class LockStatementAbortedError extends DbLockError {}

/**
 * True for errors after which the same statement may simply be sent again: lock-wait timeout
 * (1205, only the statement was rolled back; 1467 for the AUTO-INC lock) and deadlock (1213, the
 * whole transaction was).
 */
export function isTransient(error: unknown): boolean {
  const errno = (error as { errno?: unknown } | null)?.errno;
  return errno === ER_LOCK_WAIT_TIMEOUT || errno === ER_LOCK_DEADLOCK || errno === ER_AUTOINC_READ_FAILED;
}

type QueryResult = unknown[] | Record<string, unknown>;

/**
 * The library's own small mysql2 pool. Lock statements never share a connection with business
 * code, so a business pool exhausted by REQUIRES_NEW transactions cannot starve grants or
 * renewals (spring-framework #26250), and a grant can be one multi-statement round trip.
 *
 * Every round trip goes through `query()`, which counts it (`roundTrips`), bounds it with a
 * client-side deadline, and on expiry kills the statement on the server (a client timeout alone
 * would leave it running there) and destroys the connection rather than returning it mid-statement.
 */
export class LockConnectionPool {
  private readonly pool: Pool;
  /**
   * One more connection, only for `reserved` statements (the watchdog's renewals): a burst of
   * grants and releases queued on the main pool cannot delay a renewal past its lease.
   */
  private readonly reserved: Pool;
  private closed = false;
  /** Round trips sent to the server since the pool was created. */
  roundTrips = 0;

  constructor(private readonly options: PoolOptions) {
    this.pool = mysql.createPool(options);
    this.reserved = mysql.createPool({ ...options, connectionLimit: 1 });
    for (const pool of [this.pool, this.reserved]) {
      pool.on('connection', (connection) => {
        // Every lock statement: READ COMMITTED (no gap locks, fresh view per statement), and a
        // short server-side row-lock wait so a blocked statement cannot outlive its caller by much.
        connection.query(
          'SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED; SET SESSION innodb_lock_wait_timeout = 1',
          (error) => {
            if (error) connection.destroy();
          },
        );
      });
    }
  }

  /** Checks that the server answers; used at bootstrap so bad credentials fail early. */
  async ping(): Promise<void> {
    await this.query('SELECT 1');
  }

  /**
   * Sends one round trip (one or more statements). `timeoutMs` bounds the whole call, waiting
   * for a connection included; past it the statement is killed and LockStatementAbortedError
   * thrown: its outcome is unknown, the caller must clean up by owner token. A server error
   * inside a transaction batch is followed by ROLLBACK (after 1205 the transaction is still open:
   * never COMMIT it) before the connection goes back to the pool.
   */
  async query<T = QueryResult>(sql: string, timeoutMs = Infinity, lane: 'shared' | 'reserved' = 'shared'): Promise<T> {
    if (this.closed) throw new DbLockError('The lock connection pool is closed');
    const deadline = timeoutMs === Infinity ? Infinity : performance.now() + timeoutMs;
    const connection = await this.getConnection(deadline, lane === 'reserved' ? this.reserved : this.pool);
    this.roundTrips++;
    const outcome = await send<T>(connection, sql, deadline);
    if (outcome.ok) {
      connection.release();
      return outcome.result;
    }
    const error = outcome.error;
    if (outcome.timedOut) {
      await this.kill(connection);
      throw new LockStatementAbortedError(`Lock statement did not finish within ${Math.round(timeoutMs)} ms`);
    }
    if ((error as { fatal?: boolean }).fatal === true || (error as { errno?: number }).errno === undefined) {
      connection.destroy();
      throw new LockStatementAbortedError(`Lock statement failed on a broken connection: ${(error as Error).message}`, {
        cause: error,
      });
    }
    if (/\bSTART TRANSACTION\b/.test(sql)) await this.rollback(connection);
    else connection.release();
    throw error;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await Promise.all([this.pool, this.reserved].map((pool) => new Promise<void>((resolve) => pool.end(() => resolve()))));
  }

  /** A pooled connection, or LockStatementAbortedError if none frees up before the deadline. */
  private getConnection(deadline: number, pool: Pool): Promise<PoolConnection> {
    return new Promise((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      let gaveUp = false;
      if (deadline !== Infinity) {
        timer = setTimeout(
          () => {
            gaveUp = true;
            reject(new LockStatementAbortedError('No lock connection became free before the deadline'));
          },
          clampTimer(deadline - performance.now()),
        );
      }
      pool.getConnection((error, connection) => {
        if (timer) clearTimeout(timer);
        if (gaveUp) {
          if (!error) connection.release();
          return;
        }
        if (error) reject(error);
        else resolve(connection);
      });
    });
  }

  private async rollback(connection: PoolConnection): Promise<void> {
    this.roundTrips++;
    await new Promise<void>((resolve) => {
      connection.query('ROLLBACK', (error) => {
        if (error) connection.destroy();
        else connection.release();
        resolve();
      });
    });
  }

  /**
   * Kills the server thread of a connection whose statement overran its deadline, from a fresh
   * connection (the pool may be exhausted), then destroys the client side. After KILL the server
   * rolls back whatever the statement had not committed.
   */
  private async kill(connection: PoolConnection): Promise<void> {
    const threadId = Number(connection.threadId);
    const killer = mysql.createConnection({ ...this.options, multipleStatements: false });
    this.roundTrips++;
    try {
      await new Promise<void>((resolve) => killer.query(`KILL CONNECTION ${threadId}`, () => resolve()));
    } finally {
      killer.destroy();
      connection.destroy();
    }
  }
}

type Outcome<T> = { ok: true; result: T } | { ok: false; error: unknown; timedOut: boolean };

/** One query on one connection, raced against a deadline (the query keeps running on timeout). */
function send<T>(connection: PoolConnection, sql: string, deadline: number): Promise<Outcome<T>> {
  return new Promise((resolve) => {
    let settled = false;
    let timer: NodeJS.Timeout | undefined;
    if (deadline !== Infinity) {
      timer = setTimeout(() => {
        if (settled) return;
        settled = true;
        resolve({ ok: false, error: undefined, timedOut: true });
      }, clampTimer(deadline - performance.now()));
    }
    connection.query(sql, (error, result) => {
      if (timer) clearTimeout(timer);
      if (settled) return;
      settled = true;
      resolve(error ? { ok: false, error, timedOut: false } : { ok: true, result: result as T });
    });
  });
}

function clampTimer(ms: number): number {
  return Math.max(1, Math.min(Math.ceil(ms), 2 ** 31 - 1));
}
