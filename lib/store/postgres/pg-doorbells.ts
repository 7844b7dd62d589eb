import type pg from 'pg';
import { type BellDatabase, DoorbellQueue, type QueuedBell, type QueuedWait } from '../doorbell-queue.js';
import type { PgDedicatedConnection } from './pg-dedicated-connection.js';
import type { PgLockPool } from './pg-pool.js';
import { advisoryKey, LOCK_WAIT_MS } from './pg-sql.js';

/** A bell held on a connection of the library's pool. */
export type PgBell = QueuedBell<PgDedicatedConnection>;

/**
 * Doorbells as session-level advisory locks (see DoorbellStore, DoorbellQueue). PostgreSQL queues
 * a `pg_advisory_lock` behind the session that has it, and behind earlier waiters, first come first
 * served; `lock_timeout` bounds the wait in milliseconds. A session advisory lock outlives the
 * transactions of its session and goes with it, as a named lock does on MySQL. Chosen over
 * LISTEN/NOTIFY: a notification wakes every listener at once (a thundering herd that all ask
 * again), whereas a lock queue wakes exactly the next waiter, and its wait rides in the grant's
 * round trip. Behind PgBouncer in transaction pooling mode a session lock is not kept for its
 * client, so the store needs a direct connection or session pooling (see the README).
 */
export class PgDoorbells extends DoorbellQueue<PgDedicatedConnection, PgBellRequest> {
  constructor(pool: PgLockPool, idleMs: number, maxConnections: number) {
    super(advisoryLocks(pool), idleMs, maxConnections);
  }
}

function advisoryLocks(pool: PgLockPool): BellDatabase<PgDedicatedConnection, PgBellRequest> {
  return {
    nameOf: bellKey,
    open: (deadline, onDone) => pool.acquireDedicated(deadline, onDone).then(({ connection }) => connection),
    waitFor: (storedKey, name, session, waitMs) => new PgBellRequest(storedKey, name, session, waitMs),
    gotBell: (_wait, waitResult) => Number((waitResult as pg.QueryResult | undefined)?.rows[0]?.got) === 1,
    ringStatement: (name) => `SELECT pg_advisory_unlock(${name})`,
    send: (session, sql, deadline) => session.query(sql, Math.max(1, deadline - performance.now())),
  };
}

/**
 * A waiter's request for a bell: its session and the statements that wait, sent in front of the
 * grant. A wait that times out stops the batch (55P03) before the grant runs: see grantAfterBell.
 */
export class PgBellRequest implements QueuedWait<PgDedicatedConnection> {
  readonly kind = 'wait' as const;
  /** The wait, bounded below the session's own lock wait where the caller's budget is shorter; its result last. */
  readonly statements: readonly string[];
  /** Which of `statements` answers the wait's result. */
  readonly resultAt: number;

  constructor(
    readonly storedKey: string,
    readonly name: string,
    readonly connection: PgDedicatedConnection,
    readonly waitMs: number,
  ) {
    const bounded = Math.ceil(waitMs) < LOCK_WAIT_MS;
    this.resultAt = bounded ? 1 : 0;
    this.statements = [
      ...(bounded ? [`SELECT set_config('lock_timeout', '${Math.max(1, Math.ceil(waitMs))}ms', true)`] : []),
      // MATERIALIZED: the lock is taken before the clock is read. statement_timestamp() is when the round trip arrived.
      `WITH w AS MATERIALIZED (SELECT pg_advisory_lock(${name})) SELECT 1 AS got, ` +
        `(extract(epoch FROM clock_timestamp() - statement_timestamp()) * 1000000)::bigint AS waited_us FROM w`,
      // The grant's own row-lock wait is the session's again (the grant bounds it further when it must).
      ...(bounded ? [`SELECT set_config('lock_timeout', '${LOCK_WAIT_MS}ms', true)`] : []),
    ];
  }

  /** How long the wait lasted on the server, in ms, from its result. */
  waitedMs(waitResult: unknown): number {
    return Math.max(0, Number((waitResult as pg.QueryResult | undefined)?.rows[0]?.waited_us ?? 0) / 1000) || 0;
  }

  cancel(): void {
    this.connection.destroy();
  }
}

/**
 * A bell's advisory-lock key: 64 bits of a hash of the key, in a namespace of the library's own
 * (a collision with another key, or with the app's own advisory locks, costs a wait of at most a
 * second, never a wrong grant: bells never decide who holds a key).
 */
export function bellKey(storedKey: string): string {
  return advisoryKey('bell', storedKey);
}
