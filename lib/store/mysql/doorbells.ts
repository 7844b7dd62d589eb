import { createHash } from 'node:crypto';
import { type BellDatabase, DoorbellQueue, type QueuedBell, type QueuedWait } from '../doorbell-queue.js';
import type { LockConnectionPool } from './lock-connection-pool.js';
import type { DedicatedConnection } from './dedicated-connection.js';
import { format, rowsOf } from './sql.js';

/** A bell held on a connection of the library's pool. */
export type Bell = QueuedBell<DedicatedConnection>;

/**
 * Doorbells as GET_LOCK named locks (see DoorbellStore, DoorbellQueue): a waiter's GET_LOCK waits
 * in line behind the session that has the name. Off on a multi-primary cluster: named locks are
 * local to one node there.
 */
export class Doorbells extends DoorbellQueue<DedicatedConnection, BellRequest> {
  constructor(pool: LockConnectionPool, scope: string, idleMs: number, maxConnections: number) {
    super(namedLocks(pool, scope), idleMs, maxConnections);
  }
}

function namedLocks(pool: LockConnectionPool, scope: string): BellDatabase<DedicatedConnection, BellRequest> {
  return {
    nameOf: (storedKey) => bellName(scope, storedKey),
    open: (deadline, onDone) => pool.acquireDedicated('locks', deadline, onDone),
    waitFor: (storedKey, name, session, waitMs) =>
      new BellRequest(storedKey, name, session, bellStatements.wait(name, waitMs), bellStatements.waitInto(name, waitMs)),
    gotBell: (_wait, waitResult) => Number(rowsOf(waitResult)[0]?.got) === 1,
    ringStatement: (name) => bellStatements.ring(name),
    send: (session, sql, deadline) => session.query(sql, deadline),
  };
}

/** A waiter's request for a bell: the connection it waits on and the statement that waits. */
export class BellRequest implements QueuedWait<DedicatedConnection> {
  readonly kind = 'wait' as const;
  constructor(
    readonly storedKey: string,
    readonly name: string,
    readonly connection: DedicatedConnection,
    readonly waitStatement: string,
    /** The same wait with its result kept in session variables (read back by `waitResultStatement`): for a batch an error may stop. */
    readonly waitIntoStatement: string,
  ) {}

  /** The result of `waitIntoStatement`, in the shape of `waitStatement`'s, with `alsoRead` (a select list) beside it. */
  waitResultWith(alsoRead: string): string {
    return `${this.waitResultStatement}, ${alsoRead}`;
  }

  /** The result of `waitIntoStatement`, in the shape of `waitStatement`'s. */
  readonly waitResultStatement = bellStatements.waitResult;

  /** How long the wait lasted on the server, in ms, from the wait's result. */
  waitedMs(waitResult: unknown): number {
    return Math.max(0, Number(rowsOf(waitResult)[0]?.waited_us ?? 0) / 1000) || 0;
  }

  cancel(): void {
    this.connection.destroy();
  }
}

/**
 * A bell's statements. The wait answers whether it got the bell and how long it waited: NOW(6) is
 * fixed when the statement starts, SYSDATE(6) is read after the wait (both UTC: the pool sets
 * time_zone, so no DST change skews it; --sysdate-is-now: 0, conservative). `waitInto` keeps that
 * answer in session variables, read back by `waitResult`, for a batch an error may stop.
 */
export const bellStatements = {
  wait: (name: string, waitMs: number): string =>
    format(`SELECT GET_LOCK(?, ?) AS got, TIMESTAMPDIFF(MICROSECOND, NOW(6), SYSDATE(6)) AS waited_us`, [name, waitMs / 1000]),
  waitInto: (name: string, waitMs: number): string =>
    format(`SELECT GET_LOCK(?, ?), TIMESTAMPDIFF(MICROSECOND, NOW(6), SYSDATE(6)) INTO @dbl_bell_got, @dbl_bell_waited_us`, [name, waitMs / 1000]),
  waitResult: 'SELECT @dbl_bell_got AS got, @dbl_bell_waited_us AS waited_us',
  ring: (name: string): string => format(`DO RELEASE_LOCK(?)`, [name]),
} as const;

/** Named locks are server-wide and at most 64 characters: a hash of the database and the key. */
export function bellName(scope: string, storedKey: string): string {
  return `dbl:${createHash('sha1').update(scope).update('\0').update(storedKey).digest('base64url')}`;
}
