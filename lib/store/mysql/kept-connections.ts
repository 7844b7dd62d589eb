import type { Pool, PoolConnection } from 'mysql2';
import { classify } from './errno.js';
import { LockStatementError } from '../lock-statement.error.js';
import { deadlines } from '../../core/deadline-watch.js';
import { closeUnderWork } from './close-under-work.js';
import { checkoutBound } from '../../core/connection-opening.js';

/**
 * The connections LockConnectionPool takes from its mysql2 pools and keeps between statements, last
 * in first out: taking one back is synchronous, while mysql2 hands out even a free connection on a
 * later tick, behind whatever else the caller started meanwhile (a grant would go on the wire after it).
 */
export class KeptConnections {
  private readonly idle = new Map<Pool, PoolConnection[]>();
  /** Checkouts waiting for mysql2 (its pool was exhausted): connections go back to it then, so none waits forever. */
  private waitingForPool = 0;
  /** How long a connection just opened for its taker took to open, ms: its first statement's answer bound starts after it. */
  private readonly openedIn = new WeakMap<PoolConnection, number>();

  constructor(private readonly closed: () => boolean) {}

  /** After a clean round trip: kept for the next statement, or given back to mysql2 if someone waits there. */
  keep(pool: Pool, connection: PoolConnection): void {
    if (this.closed() || this.waitingForPool > 0) return connection.release();
    let kept = this.idle.get(pool);
    if (!kept) this.idle.set(pool, (kept = []));
    kept.push(connection);
  }

  /** A kept connection at once (no tick: the caller's statement goes out before anything else runs), else one from mysql2. */
  take(pool: Pool, deadline: number): PoolConnection | Promise<PoolConnection> {
    // One the server closed while kept (killed, timed out) is dropped here rather than fail a statement.
    for (let kept = this.idle.get(pool)?.pop(); kept; kept = this.idle.get(pool)?.pop()) {
      if ((kept as { state?: string }).state === 'authenticated') return kept;
      closeUnderWork(kept);
    }
    return this.checkout(pool, deadline);
  }

  /** How long `connection` took to open for this taker (0 if it was open already), told to `onOpened`; asked once. */
  openTime(connection: PoolConnection, onOpened?: (ms: number) => void): number {
    const ms = this.openedIn.get(connection);
    if (ms === undefined) return 0;
    this.openedIn.delete(connection);
    onOpened?.(ms);
    return ms;
  }

  /** The connections kept now, of every pool. */
  all(): PoolConnection[] {
    return [...this.idle.values()].flat();
  }

  releaseAll(): void {
    for (const kept of this.idle.values()) for (const connection of kept.splice(0)) connection.release();
  }

  /**
   * A connection from mysql2 by `deadline`, or by OPEN_BOUND_MS when mysql2 opens one for this
   * taker (opening is not waiting for others; see connection-opening.ts).
   */
  private checkout(pool: Pool, deadline: number): Promise<PoolConnection> {
    if (this.closed()) return Promise.reject(new LockStatementError('unreachable', new Error('The lock connection pool is closed')));
    const askedAt = performance.now();
    const { opens, bound } = checkoutBound(pool, deadline);
    return new Promise((resolve, reject) => {
      let gaveUp = false;
      const watched =
        bound === Infinity
          ? undefined
          : deadlines.watch(bound, () => {
              gaveUp = true;
              reject(LockStatementError.notSent('No lock connection became free before the deadline'));
            });
      this.waitingForPool++;
      pool.getConnection((error, connection) => {
        this.waitingForPool--;
        watched?.cancel();
        if (gaveUp) {
          if (!error) connection.release();
          return;
        }
        // Nothing was sent: a failure to connect is "unreachable" whatever its code says.
        if (error) return reject(new LockStatementError(classify(error) === 'other' ? 'unreachable' : classify(error), error));
        // Only this checkout's own open is told (openTime): never one a connection had for an earlier taker.
        if (opens) this.openedIn.set(connection, performance.now() - askedAt);
        else this.openedIn.delete(connection);
        resolve(connection);
      });
    });
  }
}
