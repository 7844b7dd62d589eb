import { createHash } from 'node:crypto';
import type { Bell as BellView, BellWait, DoorbellStore } from '../doorbell-store.js';
import type { LockConnectionPool } from './lock-connection-pool.js';
import type { DedicatedConnection } from './dedicated-connection.js';
import { format, rowsOf } from './sql.js';

/** Longest a waiter blocks on a doorbell before it asks the database anyway (a stalled holder keeps its bell, not its lease). */
const BELL_WAIT_MS = 1_000;

/** Bell names remembered per process (see Doorbells.nameOf), and keys whose bell a holder rang (see rungLately). */
const MAX_REMEMBERED_NAMES = 10_000;

/** How long a key whose bell a holder of this process rang counts as contended. */
const RUNG_LATELY_MS = 1_000;

/**
 * Doorbells as GET_LOCK named locks (see DoorbellStore). Their connections come from the
 * library's pool, at most `maxConnections` at once (the pool keeps the rest for grants and
 * releases), so they count inside `poolSize`. Off on a multi-primary cluster: named locks are
 * local to one node there.
 */
export class Doorbells implements DoorbellStore {
  private readonly bells = new Map<string, Bell>();
  private readonly names = new Map<string, string>();
  /** When a holder of this process last rang each key's bell (performance.now()). */
  private readonly rungAt = new Map<string, number>();
  /** Connections taken for bells now: waits in flight and bells held. */
  private inUse = 0;

  constructor(
    private readonly pool: LockConnectionPool,
    private readonly scope: string,
    /** How long a bell nobody uses any more is kept (a waiter gave up between tries). */
    private readonly idleMs: number,
    readonly maxConnections: number,
  ) {}

  nameOf(storedKey: string): string {
    // Asked twice per try, and a hash per call shows on the grant path: names are kept (bounded).
    let name = this.names.get(storedKey);
    if (name === undefined) {
      if (this.names.size >= MAX_REMEMBERED_NAMES) this.names.clear();
      name = bellName(this.scope, storedKey);
      this.names.set(storedKey, name);
    }
    return name;
  }

  current(storedKey: string): Bell | undefined {
    return this.bells.get(storedKey);
  }

  rungLately(storedKey: string): boolean {
    const at = this.rungAt.get(storedKey);
    return at !== undefined && performance.now() - at < RUNG_LATELY_MS;
  }

  async prepare(storedKey: string, deadline: number): Promise<Bell | BellRequest | undefined> {
    const mine = this.bells.get(storedKey);
    if (mine?.state === 'waiting') return mine.touch();
    const waitMs = Math.min(BELL_WAIT_MS, deadline - performance.now());
    if (waitMs < 1 || this.inUse >= this.maxConnections) return undefined;
    this.inUse++;
    let connection: DedicatedConnection;
    try {
      connection = await this.pool.acquireDedicated('locks', performance.now() + Math.min(waitMs, 50), () => this.inUse--);
    } catch {
      this.inUse--;
      return undefined; // no connection free: ask without a bell
    }
    const name = this.nameOf(storedKey);
    return new BellRequest(storedKey, name, connection, bellStatements.wait(name, waitMs), bellStatements.waitInto(name, waitMs));
  }

  settle(request: BellWait, waitResult: unknown): Bell | undefined {
    const wait = request as BellRequest;
    const got = Number(rowsOf(waitResult)[0]?.got) === 1;
    if (!got) {
      // No result: the batch the wait rode in failed and the grant was sent again. Whether the
      // session took the bell is unknown, so it is closed, never pooled perhaps holding it.
      if (waitResult === undefined) wait.connection.destroy();
      else wait.connection.release();
      return undefined;
    }
    // Another queue of this process (same key, other key set) may have got it meanwhile.
    if (this.bells.has(wait.storedKey)) {
      void ring(wait.connection, wait.name);
      return undefined;
    }
    const bell = new Bell(this, wait.storedKey, wait.name, wait.connection, this.idleMs);
    this.bells.set(wait.storedKey, bell);
    return bell;
  }

  /** The bell was rung; `byHolder`: by its holder's release (others were queued on it). */
  forget(bell: Bell, byHolder: boolean): void {
    if (this.bells.get(bell.storedKey) === bell) this.bells.delete(bell.storedKey);
    if (!byHolder) return;
    if (this.rungAt.size >= MAX_REMEMBERED_NAMES) this.rungAt.clear();
    this.rungAt.set(bell.storedKey, performance.now());
  }

  async close(): Promise<void> {
    await Promise.allSettled([...this.bells.values()].map((bell) => bell.ring()));
  }
}

/** A waiter's request for a bell: the connection it waits on and the statement that waits. */
export class BellRequest implements BellWait {
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

/** A named lock held on a connection of its own, until rung. */
export class Bell implements BellView {
  readonly kind = 'bell' as const;
  state: 'waiting' | 'holding' | 'rung' = 'waiting';
  private idleTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly owner: Doorbells,
    readonly storedKey: string,
    readonly name: string,
    /** Holds the bell; its holder's grant and release go through it too. */
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

  hold(): void {
    this.state = 'holding';
    if (this.idleTimer) clearTimeout(this.idleTimer);
  }

  /** Sent right after the holder's release, in the same round trip. */
  get ringStatement(): string {
    return bellStatements.ring(this.name);
  }

  /** Already rung by the statement sent with the release: local bookkeeping only. */
  rungWith(ok: boolean): void {
    if (!this.markRung()) return;
    if (ok) this.connection.release();
    else this.connection.destroy();
  }

  async ring(): Promise<void> {
    if (this.markRung()) await ring(this.connection, this.name);
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

async function ring(connection: DedicatedConnection, name: string): Promise<void> {
  try {
    await connection.query(bellStatements.ring(name), performance.now() + 5000);
    connection.release();
  } catch {
    connection.destroy(); // closing the session frees the named lock too
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
