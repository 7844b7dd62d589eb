import type pg from 'pg';
import { ANSWER_BOUND_MS } from '../answer-bound.js';
import type { PreparedStatements } from './pg-pool.js';

/** A connection of the library's pool kept out of it by its user (a doorbell's session: its advisory lock lives with it). */
export class PgDedicatedConnection {
  private done = false;
  /** The session ended while kept (terminated by the server, a network cut): never pooled again. */
  private lost: Error | undefined;
  /**
   * pg emits 'error' on a client that is checked out of its pool and idle when its session ends;
   * with no listener that is an uncaught exception in the app. The next query fails anyway.
   */
  private readonly onError = (error: Error): void => {
    this.lost = error;
  };

  constructor(
    private readonly client: pg.PoolClient,
    private readonly sender: (sql: string, answerWithinMs: number, prepared?: PreparedStatements) => Promise<pg.QueryResult[]>,
    /** Called once when it goes back or is closed. */
    private readonly onDone?: () => void,
    /** Whether a failed round trip left the session unusable (then it is closed, not pooled, when it goes back). */
    private readonly broken: () => boolean = () => false,
  ) {
    client.on('error', this.onError);
  }

  /** One round trip, answered within `answerWithinMs`. A failure leaves the session as it is: the caller closes it, or rolls back. @throws LockStatementError */
  query(sql: string, answerWithinMs = ANSWER_BOUND_MS, prepared?: PreparedStatements): Promise<pg.QueryResult[]> {
    return this.sender(sql, answerWithinMs, prepared);
  }

  /** Back to the pool (the caller left no transaction and no advisory lock behind); closed instead if it broke. */
  release(): void {
    if (this.done) return;
    this.done = true;
    this.client.off('error', this.onError);
    this.client.release(this.lost ?? (this.broken() ? new Error('the session broke mid-statement') : undefined));
    this.onDone?.();
  }

  /** Closed: the server frees whatever the session held (advisory locks, transaction); a statement in flight fails. */
  destroy(): void {
    if (this.done) return;
    this.done = true;
    this.client.off('error', this.onError);
    this.client.release(true);
    this.onDone?.();
  }
}
