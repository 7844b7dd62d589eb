import { createHash } from 'node:crypto';
import type { HeldDoorbell } from '../../core/held-lock.js';
import type { DedicatedConnection, LockConnectionPool } from '../../mysql/lock-connection-pool.js';
import { format, rowsOf } from '../../mysql/sql.js';

/** Longest a waiter blocks on a doorbell before it asks the database anyway (a stalled holder keeps its bell, not its lease). */
const BELL_WAIT_MS = 1_000;

/**
 * Doorbells: how a lease waiter in another process learns of a release without polling, while
 * no connection is held per held lock. A contended key gets a named lock (GET_LOCK), its bell.
 * A waiting writer blocks on the bell, on a connection of its own; whoever has the bell asks for
 * the key, polling with backoff if it is still held, and keeps the bell for the whole of its hold;
 * its release rings the bell (RELEASE_LOCK right after the release committed), which wakes the next
 * waiter in the server, first come first served, whatever its process. Only keys that someone
 * waits for get a bell, so idle and uncontended locks cost no connection.
 *
 * Bells never decide who holds a key (the log rows do), so a lost bell costs only speed: waiters
 * wake at most every second to ask anyway. Off on a multi-primary cluster, where named locks are
 * local to one node.
 */
export class Doorbells {
  /** Bells this process has: held by a waiting caller (`waiting`) or by the holder of the key. */
  private readonly bells = new Map<string, Bell>();

  constructor(
    /** A pool of its own: a connection holding a bell must never starve grants and releases. */
    private readonly pool: LockConnectionPool,
    /** Names bells per database, so two apps sharing a server never share a bell. */
    private readonly scope: string,
    /** How long a bell nobody uses any more is kept (a waiter gave up between tries). */
    private readonly idleMs: number,
  ) {}

  /** The bell this process has for `storedKey`, if any (held by a waiter or a holder). */
  current(storedKey: string): Bell | undefined {
    return this.bells.get(storedKey);
  }

  nameOf(storedKey: string): string {
    return bellName(this.scope, storedKey);
  }

  /**
   * Waits on the key's bell until it rings or `deadline` (at most a second), on a connection of
   * the bell pool. Returns the bell if this process now has it, undefined if the wait timed out or
   * no connection was free (the caller then just asks the database). A bell held by a holder of
   * this very process is waited on like anyone else's (named locks belong to a session).
   */
  async wait(storedKey: string, deadline: number): Promise<Bell | undefined> {
    const mine = this.bells.get(storedKey);
    if (mine?.state === 'waiting') return mine.touch();
    const waitMs = Math.min(BELL_WAIT_MS, deadline - performance.now());
    if (waitMs < 1) return undefined;
    let connection: DedicatedConnection;
    try {
      connection = await this.pool.acquireDedicated('locks', performance.now() + Math.min(waitMs, 50));
    } catch {
      return undefined; // every bell connection is busy: ask without one
    }
    const name = bellName(this.scope, storedKey);
    try {
      const got = rowsOf(await connection.query(format(`SELECT GET_LOCK(?, ?) AS got`, [name, waitMs / 1000]), performance.now() + waitMs + 1000))[0]?.got;
      if (Number(got) !== 1) {
        connection.release();
        return undefined;
      }
    } catch {
      connection.destroy();
      return undefined;
    }
    // Someone else's bell for this key may have appeared meanwhile in this process (two queues, same key).
    if (this.bells.has(storedKey)) {
      await ring(connection, name);
      return undefined;
    }
    const bell = new Bell(this, storedKey, name, connection, this.idleMs);
    this.bells.set(storedKey, bell);
    return bell;
  }

  forget(bell: Bell): void {
    if (this.bells.get(bell.storedKey) === bell) this.bells.delete(bell.storedKey);
  }

  async close(): Promise<void> {
    await Promise.allSettled([...this.bells.values()].map((bell) => bell.ring()));
    await this.pool.close();
  }
}

/** A named lock held on a connection of its own, until rung. */
export class Bell implements HeldDoorbell {
  state: 'waiting' | 'holding' | 'rung' = 'waiting';
  private idleTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly owner: Doorbells,
    readonly storedKey: string,
    private readonly name: string,
    /** The connection holding the bell; grants and releases of its holder go through it too. */
    readonly connection: DedicatedConnection,
    private readonly idleMs: number,
  ) {
    this.touch();
  }

  /** A waiter still uses it: keep it past the idle timeout. */
  touch(): this {
    if (this.idleTimer) clearTimeout(this.idleTimer);
    if (this.state === 'waiting') {
      this.idleTimer = setTimeout(() => void this.ring(), this.idleMs);
      this.idleTimer.unref();
    }
    return this;
  }

  /** The bell now belongs to the holder of the key, until its release. */
  hold(): void {
    this.state = 'holding';
    if (this.idleTimer) clearTimeout(this.idleTimer);
  }

  /** Releases the bell (the next waiter wakes) and gives the connection back. Idempotent. */
  async ring(): Promise<void> {
    if (this.state === 'rung') return;
    this.state = 'rung';
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.owner.forget(this);
    await ring(this.connection, this.name);
  }
}

async function ring(connection: DedicatedConnection, name: string): Promise<void> {
  try {
    await connection.query(format(`DO RELEASE_LOCK(?)`, [name]), performance.now() + 5000);
    connection.release();
  } catch {
    connection.destroy(); // closing the session frees the named lock too
  }
}

/** Named locks are server-wide and at most 64 characters: a hash of the database and the key. */
export function bellName(scope: string, storedKey: string): string {
  return `dbl:${createHash('sha1').update(scope).update('\0').update(storedKey).digest('base64url')}`;
}
