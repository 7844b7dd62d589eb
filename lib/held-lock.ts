import type { LockHandle } from './lock-handle.js';
import type { LockTarget } from './lock-key.js';
import type { LockMode } from './lock-mode.js';
import type { GrantedRow } from './storage/lock-store.js';

/** What a HeldLock needs from the service; keeps the handle free of SQL. */
export interface HeldLockOwner {
  releaseHeld(lock: HeldLock, failed: boolean): Promise<void>;
  extendHeld(lock: HeldLock, leaseMs: number | undefined): Promise<void>;
}

/**
 * A lock granted by the database to this process: the log rows of one acquisition (one per
 * key), their lease as last confirmed, and the AbortSignal that tells the holder it lost them.
 */
export class HeldLock implements LockHandle {
  readonly keys: readonly string[];
  readonly mode: LockMode;
  readonly modes: Readonly<Record<string, LockMode>>;
  readonly fencingTokens: Readonly<Record<string, number>>;
  readonly reentrant = false;
  expiresAt: Date;
  /** Monotonic time (performance.now) after which the lease has surely run out unless renewed. */
  leaseDeadline: number;
  /** Set while the fenced commit runs: the watchdog leaves the rows alone (the fence decides). */
  fencing = false;
  state: 'held' | 'releasing' | 'released' | 'lost' = 'held';
  private readonly abort = new AbortController();

  constructor(
    private readonly service: HeldLockOwner,
    /** Acquisition token: the `owner` of every log row of this lock. */
    readonly owner: string,
    readonly targets: readonly LockTarget[],
    rows: readonly GrantedRow[],
    public leaseMs: number,
    /** Monotonic time the grant was requested: the lease counts from no later than this. */
    requestedAt: number,
    /** Monotonic time of the grant. */
    readonly acquiredAt: number,
    readonly waitedMs: number,
  ) {
    this.keys = Object.freeze(targets.map((t) => t.key));
    this.mode = targets.some((t) => t.mode === 'write') ? 'write' : 'read';
    this.modes = Object.freeze(Object.fromEntries(targets.map((t) => [t.key, t.mode])));
    const tokens: Record<string, number> = {};
    for (const target of targets) {
      const row = rows.find((r) => r.storedKey === target.storedKey);
      tokens[target.key] = row?.fencingToken ?? 0;
    }
    this.fencingTokens = Object.freeze(tokens);
    this.expiresAt = minDate(rows.map((r) => r.expiresAt));
    this.leaseDeadline = requestedAt + leaseMs;
  }

  get fencingToken(): number {
    return this.fencingTokens[this.keys[0]!]!;
  }

  get signal(): AbortSignal {
    return this.abort.signal;
  }

  get released(): boolean {
    return this.state === 'released' || this.state === 'lost';
  }

  get live(): boolean {
    return this.state === 'held';
  }

  release(): Promise<void> {
    return this.service.releaseHeld(this, false);
  }

  /** Releases with status FAILED when `failed` (the business work behind it failed). */
  releaseAs(failed: boolean): Promise<void> {
    return this.service.releaseHeld(this, failed);
  }

  extend(leaseMs?: number): Promise<void> {
    return this.service.extendHeld(this, leaseMs);
  }

  /** Marks the lock lost and aborts its signal with the reason. Idempotent. */
  markLost(reason: Error): void {
    if (this.state === 'held' || this.state === 'releasing') this.state = 'lost';
    if (!this.abort.signal.aborted) this.abort.abort(reason);
  }

  /** Marks the lock released (signal not aborted: nothing went wrong). */
  markReleased(): void {
    this.state = 'released';
  }
}

/**
 * An acquisition inside a call chain that already holds some or all of its keys (G5). Keys the
 * chain holds cost no SQL: they share the outer locks' tokens, lease and signal. Keys it does
 * not hold yet were granted as `own` (a normal lock), which is all that `release()` gives back.
 */
export class NestedLock implements LockHandle {
  readonly keys: readonly string[];
  readonly mode: LockMode;
  readonly modes: Readonly<Record<string, LockMode>>;
  readonly fencingTokens: Readonly<Record<string, number>>;
  readonly signal: AbortSignal;
  private done = false;

  constructor(
    targets: readonly LockTarget[],
    /** The lock holding each key, by stored key: an outer lock, or `own`. */
    private readonly holders: ReadonlyMap<string, HeldLock>,
    readonly own: HeldLock | undefined,
  ) {
    this.keys = Object.freeze(targets.map((t) => t.key));
    this.mode = targets.some((t) => t.mode === 'write') ? 'write' : 'read';
    this.modes = Object.freeze(Object.fromEntries(targets.map((t) => [t.key, t.mode])));
    this.fencingTokens = Object.freeze(
      Object.fromEntries(targets.map((t) => [t.key, holders.get(t.storedKey)!.fencingTokens[t.key] ?? 0])),
    );
    const locks = [...new Set(holders.values())];
    this.signal = locks.length === 1 ? locks[0]!.signal : AbortSignal.any(locks.map((l) => l.signal));
  }

  get reentrant(): boolean {
    return this.own === undefined;
  }
  get fencingToken(): number {
    return this.fencingTokens[this.keys[0]!]!;
  }
  get expiresAt(): Date {
    return minDate([...this.holders.values()].map((l) => l.expiresAt));
  }
  get released(): boolean {
    return this.done || [...this.holders.values()].some((l) => l.released);
  }
  release(): Promise<void> {
    return this.releaseAs(false);
  }
  async releaseAs(failed: boolean): Promise<void> {
    if (this.done) return;
    this.done = true;
    if (this.own) await this.own.releaseAs(failed);
  }
  holdersByKey(): ReadonlyMap<string, HeldLock> {
    return this.holders;
  }
  async extend(leaseMs?: number): Promise<void> {
    for (const lock of new Set(this.holders.values())) await lock.extend(leaseMs);
  }
}

function minDate(dates: readonly Date[]): Date {
  return new Date(Math.min(...dates.map((d) => d.getTime())));
}
