import type { PoolConnection } from 'mysql2';
import { closeUnderWork } from './close-under-work.js';

/** A connection kept out of the pool by its user. */
export class DedicatedConnection {
  private done = false;
  constructor(
    private readonly connection: PoolConnection,
    private readonly sender: (sql: string, deadline: number) => Promise<unknown>,
    /** Called once when it goes back or is closed. */
    private readonly onDone?: () => void,
  ) {}

  get threadId(): number {
    return Number(this.connection.threadId);
  }

  query<T = unknown>(sql: string, deadline = Infinity): Promise<T> {
    return this.sender(sql, deadline) as Promise<T>;
  }

  /** Back to the pool (the caller left no transaction and no named lock behind). */
  release(): void {
    if (this.done) return;
    this.done = true;
    this.connection.release();
    this.onDone?.();
  }

  /** Closed: the server frees whatever the session held (named locks, transaction); a statement in flight fails. */
  destroy(): void {
    if (this.done) return;
    this.done = true;
    closeUnderWork(this.connection);
    this.onDone?.();
  }
}
