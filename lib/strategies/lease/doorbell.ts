import { createHash } from 'node:crypto';
import type { HeldDoorbell } from '../../core/held-lock.js';
import type { DedicatedConnection, LockConnectionPool } from '../../mysql/lock-connection-pool.js';
import { format, NOW, parseDate, rowsOf } from '../../mysql/sql.js';

/** Longest a waiter blocks on a doorbell before it asks the database anyway (a stalled holder keeps its bell, not its lease). */
const BELL_WAIT_MS = 1_000;

/** Bell names remembered per process (see Doorbells.nameOf). */
const MAX_REMEMBERED_NAMES = 10_000;

/**
 * Doorbells: how a lease waiter in another process learns of a release without polling, while
 * no connection is held per held lock. A contended key gets a named lock (GET_LOCK), its bell.
 * A waiting writer blocks on the bell, on a connection of its own, and asks for the key in the
 * same round trip as soon as the bell is its; whoever has the bell keeps it, polling with backoff
 * while the key is still held and then for the whole of its hold; its release rings the bell
 * (RELEASE_LOCK right after the release committed, in the same round trip), which wakes the next
 * waiter in the server, first come first served, whatever its process. Only keys someone waits for
 * get a bell, so idle and uncontended locks cost no connection.
 *
 * Bells never decide who holds a key (the log rows do), so a lost bell costs only speed: waiters
 * wake at most every second to ask anyway. Off on a multi-primary cluster, where named locks are
 * local to one node.
 */
export class Doorbells {
  /** Bells this process has: held by a waiting caller (`waiting`) or by the holder of the key. */
  private readonly bells = new Map<string, Bell>();
  private readonly names = new Map<string, string>();

  constructor(
    /** A pool of its own: a connection holding a bell must never starve grants and releases. */
    private readonly pool: LockConnectionPool,
    /** Names bells per database, so two apps sharing a server never share a bell. */
    private readonly scope: string,
    /** How long a bell nobody uses any more is kept (a waiter gave up between tries). */
    private readonly idleMs: number,
  ) {}

  nameOf(storedKey: string): string {
    // Asked twice per try: a hash per call is measurable on the grant path, so names are kept
    // (bounded: a process that locks ever new keys starts the memo over).
    let name = this.names.get(storedKey);
    if (name === undefined) {
      if (this.names.size >= MAX_REMEMBERED_NAMES) this.names.clear();
      name = bellName(this.scope, storedKey);
      this.names.set(storedKey, name);
    }
    return name;
  }

  /** The bell this process has for `storedKey`, if any (held by a waiter or a holder). */
  current(storedKey: string): Bell | undefined {
    return this.bells.get(storedKey);
  }

  /**
   * The bell a waiter asks through: this process's own when a waiting caller already has it, else a
   * connection of the bell pool and the statement that waits for the bell (at most a second, never
   * past `deadline`), to send in one round trip with the grant. Undefined when no connection is
   * free (the caller then just asks the database). A bell held by a holder of this very process is
   * waited on like anyone else's: named locks belong to a session.
   */
  async prepare(storedKey: string, deadline: number): Promise<Bell | BellRequest | undefined> {
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
    const name = this.nameOf(storedKey);
    // The statement's clock is fixed when it starts: how long the wait lasted is told by the grant after it.
    return new BellRequest(this, storedKey, name, connection, format(`SELECT GET_LOCK(?, ?) AS got, ${NOW} AS started_at`, [name, waitMs / 1000]));
  }

  /** The wait of `request` ended: the bell is ours (`got`), or the connection goes back. */
  settle(request: BellRequest, waitResult: unknown): Bell | undefined {
    const got = Number(rowsOf(waitResult)[0]?.got) === 1;
    if (!got) {
      request.connection.release();
      return undefined;
    }
    // Another queue of this process (same key, other key set) may have got it meanwhile.
    if (this.bells.has(request.storedKey)) {
      void ring(request.connection, request.name);
      return undefined;
    }
    const bell = new Bell(this, request.storedKey, request.name, request.connection, this.idleMs);
    this.bells.set(request.storedKey, bell);
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

/** A waiter's request for a bell: the connection it waits on and the statement that waits. */
export class BellRequest {
  constructor(
    readonly owner: Doorbells,
    readonly storedKey: string,
    readonly name: string,
    readonly connection: DedicatedConnection,
    readonly waitStatement: string,
  ) {}

  /** When the wait started on the server clock, from the wait's result. */
  startedAt(waitResult: unknown): Date | undefined {
    const value = rowsOf(waitResult)[0]?.started_at;
    return value === undefined || value === null ? undefined : parseDate(value);
  }

  /** The round trip failed: the session may hold the bell or not; closing it frees the bell either way. */
  abandon(): void {
    this.connection.destroy();
  }
}

/** A named lock held on a connection of its own, until rung. */
export class Bell implements HeldDoorbell {
  state: 'waiting' | 'holding' | 'rung' = 'waiting';
  private idleTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly owner: Doorbells,
    readonly storedKey: string,
    readonly name: string,
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

  /** The statement that rings it, to send right after the holder's release in the same round trip. */
  get ringStatement(): string {
    return format(`DO RELEASE_LOCK(?)`, [this.name]);
  }

  /** Already rung by the statement sent with the release: only local bookkeeping is left. */
  rungWith(ok: boolean): void {
    if (this.state === 'rung') return;
    this.state = 'rung';
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.owner.forget(this);
    if (ok) this.connection.release();
    else this.connection.destroy();
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
