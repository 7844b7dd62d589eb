import type { DataSource } from 'typeorm';
import { ANSWER_BOUND_MS } from '../store/answer-bound.js';

/**
 * How long a connection that is being opened for a caller is waited for, ms, whatever is left of
 * the caller's budget. Opening a connection is not waiting for another holder: a single try on a
 * cold pool, or a burst larger than the pool has served so far, must not be refused for the time a
 * handshake takes on a loaded machine. The driver's own connect timeout usually ends it first.
 */
export const OPEN_BOUND_MS = ANSWER_BOUND_MS;

/** The fields of mysql2's Pool this reads (its own, stable across mysql2 3.x). */
interface Mysql2PoolShape {
  _freeConnections: { length: number };
  _allConnections: { length: number };
  config: { connectionLimit: number };
}

/** The fields of pg's Pool this reads (its public counters). */
interface PgPoolShape {
  idleCount: number;
  totalCount: number;
  waitingCount: number;
  options: { max: number };
}

/**
 * Whether a connection taken from `pool` now would be opened for the taker, rather than waited for
 * while others use them all: nothing idle, room to open one. Knows mysql2's and pg's pools; false
 * for any other (a caller then waits as for a busy pool).
 */
export function opensConnection(pool: unknown): boolean {
  if (pool === null || typeof pool !== 'object') return false;
  const mysql2 = pool as Partial<Mysql2PoolShape>;
  if (mysql2._freeConnections && mysql2._allConnections && mysql2.config) {
    const limit = mysql2.config.connectionLimit;
    return mysql2._freeConnections.length === 0 && (limit === 0 || mysql2._allConnections.length < limit);
  }
  const pg = pool as Partial<PgPoolShape>;
  if (
    typeof pg.idleCount === 'number' &&
    typeof pg.totalCount === 'number' &&
    typeof pg.waitingCount === 'number' &&
    typeof pg.options?.max === 'number'
  ) {
    // pg hands idle clients to its queue on a later tick, in order: those queued ahead take the idle
    // ones first, then each one after them has a client opened for it while there is room.
    const beyondIdle = pg.waitingCount - pg.idleCount;
    return beyondIdle >= 0 && pg.totalCount + beyondIdle < pg.options.max;
  }
  return false;
}

/** The pool behind a TypeORM DataSource's writes: mysql2's (`driver.pool`) or pg's (`driver.master`), if it has one. */
export function dataSourcePool(dataSource: DataSource): unknown {
  const driver = dataSource.driver as unknown as { pool?: unknown; master?: unknown };
  return driver.pool ?? driver.master;
}

/**
 * How long to wait for a connection from `pool` for a caller whose budget ends at `deadline`
 * (performance.now()): until OPEN_BOUND_MS from now when the pool opens one for it, else the
 * deadline, but at least `leastMs` from now. `opens` says which.
 */
export function checkoutBound(pool: unknown, deadline: number, leastMs = 0): { opens: boolean; bound: number } {
  const opens = opensConnection(pool);
  return { opens, bound: Math.max(deadline, performance.now() + (opens ? OPEN_BOUND_MS : leastMs)) };
}
