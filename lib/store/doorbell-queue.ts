import type { Bell as BellView, BellWait, DoorbellStore } from './doorbell-store.js';

/** Longest a waiter blocks on a doorbell before it asks the database anyway (a stalled holder keeps its bell, not its lease). */
export const BELL_WAIT_MS = 1_000;

/** Bell names remembered per process (see DoorbellQueue.nameOf), and keys whose bell a holder rang (see rungLately). */
const MAX_REMEMBERED_NAMES = 10_000;

/** How long a key whose bell a holder of this process rang counts as contended. */
const RUNG_LATELY_MS = 1_000;

/** A connection of the store's pool that a bell keeps: the bell lives exactly as long as its session holds it. */
export interface BellSession {
  /** Back to the pool (the caller left no transaction and no bell behind). */
  release(): void;
  /** Closed: the server frees the bell with the session. */
  destroy(): void;
}

/** A wait for a bell on a session of its own, as a store sends it with the grant. */
export interface QueuedWait<S extends BellSession> extends BellWait {
  readonly storedKey: string;
  readonly name: string;
  readonly connection: S;
}

/** What a database gives doorbells: session-scoped locks that queue their waiters in order. */
export interface BellDatabase<S extends BellSession, W extends QueuedWait<S>> {
  /** The bell's name for a key (see DoorbellStore.nameOf). */
  nameOf(storedKey: string): string;
  /** A session of the store's pool, waited for until `deadline`; `onDone` runs once when it goes back or is closed. */
  open(deadline: number, onDone: () => void): Promise<S>;
  /** A wait of at most `waitMs` for the bell `name`, to be sent on `session` with the grant. */
  waitFor(storedKey: string, name: string, session: S, waitMs: number): W;
  /** Whether the wait's result (as the grant's round trip answered it) says the bell is ours. */
  gotBell(wait: W, waitResult: unknown): boolean;
  /** The statement that frees the bell `name` (sent alone, or after a release in its round trip). */
  ringStatement(name: string): string;
  /** Sends `sql` on `session`; rejects if it did not run. */
  send(session: S, sql: string, deadline: number): Promise<unknown>;
}

/**
 * Doorbells (see DoorbellStore), whatever the database: this process's bells, their connections
 * (at most `maxConnections` at once, counted inside the store's pool, which keeps the rest for
 * grants and releases) and the keys rung lately. The database gives the bell itself (BellDatabase).
 */
export class DoorbellQueue<S extends BellSession, W extends QueuedWait<S>> implements DoorbellStore {
  private readonly bells = new Map<string, QueuedBell<S>>();
  private readonly names = new Map<string, string>();
  /** When a holder of this process last rang each key's bell (performance.now()). */
  private readonly rungAt = new Map<string, number>();
  /** Connections taken for bells now: waits in flight and bells held. */
  private inUse = 0;

  constructor(
    readonly database: BellDatabase<S, W>,
    /** How long a bell nobody uses any more is kept (a waiter gave up between tries). */
    private readonly idleMs: number,
    readonly maxConnections: number,
  ) {}

  nameOf(storedKey: string): string {
    // Asked twice per try, and a hash per call shows on the grant path: names are kept (bounded).
    let name = this.names.get(storedKey);
    if (name === undefined) {
      if (this.names.size >= MAX_REMEMBERED_NAMES) this.names.clear();
      name = this.database.nameOf(storedKey);
      this.names.set(storedKey, name);
    }
    return name;
  }

  current(storedKey: string): QueuedBell<S> | undefined {
    return this.bells.get(storedKey);
  }

  rungLately(storedKey: string): boolean {
    const at = this.rungAt.get(storedKey);
    return at !== undefined && performance.now() - at < RUNG_LATELY_MS;
  }

  async prepare(storedKey: string, deadline: number): Promise<QueuedBell<S> | W | undefined> {
    const mine = this.bells.get(storedKey);
    if (mine?.state === 'waiting') return mine.touch();
    const waitMs = Math.min(BELL_WAIT_MS, deadline - performance.now());
    if (waitMs < 1 || this.inUse >= this.maxConnections) return undefined;
    this.inUse++;
    let session: S;
    try {
      session = await this.database.open(performance.now() + Math.min(waitMs, 50), () => this.inUse--);
    } catch {
      this.inUse--;
      return undefined; // no connection free: ask without a bell
    }
    return this.database.waitFor(storedKey, this.nameOf(storedKey), session, waitMs);
  }

  settle(request: BellWait, waitResult: unknown): QueuedBell<S> | undefined {
    const wait = request as W;
    if (!this.database.gotBell(wait, waitResult)) {
      // No result: the batch the wait rode in failed and the grant was sent again. Whether the
      // session took the bell is unknown, so it is closed, never pooled perhaps holding it.
      if (waitResult === undefined) wait.connection.destroy();
      else wait.connection.release();
      return undefined;
    }
    // Another queue of this process (same key, other key set) may have got it meanwhile.
    if (this.bells.has(wait.storedKey)) {
      void this.ringOn(wait.connection, wait.name);
      return undefined;
    }
    const bell = new QueuedBell(this, wait.storedKey, wait.name, wait.connection, this.idleMs);
    this.bells.set(wait.storedKey, bell);
    return bell;
  }

  /** The bell was rung; `byHolder`: by its holder's release (others were queued on it). */
  forget(bell: QueuedBell<S>, byHolder: boolean): void {
    if (this.bells.get(bell.storedKey) === bell) this.bells.delete(bell.storedKey);
    if (!byHolder) return;
    if (this.rungAt.size >= MAX_REMEMBERED_NAMES) this.rungAt.clear();
    this.rungAt.set(bell.storedKey, performance.now());
  }

  /** Frees the bell `name` held by `session`, and the session: back to the pool, or closed if the ring failed (which frees the bell too). */
  async ringOn(session: S, name: string): Promise<void> {
    try {
      await this.database.send(session, this.database.ringStatement(name), performance.now() + 5000);
      session.release();
    } catch {
      session.destroy();
    }
  }

  async close(): Promise<void> {
    await Promise.allSettled([...this.bells.values()].map((bell) => bell.ring()));
  }
}

/** A bell held on a connection of its own, until rung. */
export class QueuedBell<S extends BellSession> implements BellView {
  readonly kind = 'bell' as const;
  state: 'waiting' | 'holding' | 'rung' = 'waiting';
  private idleTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly owner: DoorbellQueue<S, QueuedWait<S>>,
    readonly storedKey: string,
    readonly name: string,
    /** Holds the bell; its holder's grant and release go through it too. */
    readonly connection: S,
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

  hold(): void {
    this.state = 'holding';
    if (this.idleTimer) clearTimeout(this.idleTimer);
  }

  /** Sent right after the holder's release, in the same round trip. */
  get ringStatement(): string {
    return this.owner.database.ringStatement(this.name);
  }

  /** Already rung by the statement sent with the release: local bookkeeping only. */
  rungWith(ok: boolean): void {
    if (!this.markRung()) return;
    if (ok) this.connection.release();
    else this.connection.destroy();
  }

  async ring(): Promise<void> {
    if (this.markRung()) await this.owner.ringOn(this.connection, this.name);
  }

  /** Local bookkeeping of a ring, once: false if it was rung already. */
  private markRung(): boolean {
    if (this.state === 'rung') return false;
    const byHolder = this.state === 'holding';
    this.state = 'rung';
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.owner.forget(this, byHolder);
    return true;
  }
}
