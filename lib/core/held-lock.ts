import type { EntityManager, QueryRunner } from 'typeorm';
import type { LockHandle } from './lock-handle.js';
import type { LockTarget } from './lock-key.js';
import type { LockMode } from './lock-mode.js';
import { UNNAMED_LOCK } from './lock-request.js';
import type { LockStrategyName } from '../strategies/lock-strategy-name.js';

/** What a HeldLock needs from the runtime; keeps the handle free of SQL and bookkeeping. */
export interface HeldLockHost {
  release(lock: HeldLock, failed: boolean): Promise<void>;
  extend(lock: HeldLock, leaseMs: number | undefined): Promise<void>;
  /** `lock` is past its local deadline while still held: give it up now (see HeldLock.signal). */
  overdue?(lock: HeldLock): void;
}

/** One log row of a grant: one per key. */
export interface GrantedRow {
  readonly id: string;
  readonly storedKey: string;
  readonly fencingToken: number;
  readonly expiresAt: Date;
}

/**
 * A transaction a fenced call runs in: a row-lock holder's own (its row locks are the lock), or a
 * new one on the app's DataSource.
 */
export interface LockTransaction {
  readonly runner: QueryRunner;
  /** The isolation level it was opened at, where the library named one. */
  readonly isolationLevel?: string;
  /** Called once after COMMIT or ROLLBACK: gives the connection back. */
  finish(committed: boolean): Promise<void>;
}

/**
 * How much earlier than the database the holder's signal gives up: the server counts a lease from
 * when it executed the grant or renewal, which is no earlier than when it was sent; the margin covers
 * the two clocks running at slightly different rates (1 % of the lease) and timer slack (10 ms).
 */
export function signalMarginMs(leaseMs: number): number {
  return 10 + Math.ceil(leaseMs / 100);
}

/**
 * A lock granted by the database to this process: the log rows of one acquisition (one per key),
 * the lease as last confirmed, and the AbortSignal that tells the holder it lost them.
 */
export class HeldLock implements LockHandle {
  readonly mode: LockMode;
  /** The first key's token: the one a single-key lock has. */
  readonly fencingToken: number;
  readonly reentrant = false;
  /** Log row id per key, in key order. */
  readonly rowIds: readonly string[];
  /** The library's own locks (the janitor's): never counted or announced. */
  readonly internal: boolean;
  expiresAt: Date;
  /** performance.now() from which the lease surely counts on the server: the send time of the grant, or of the latest confirmed renewal or extend. */
  leaseFrom: number;
  state: 'held' | 'releasing' | 'released' | 'lost' = 'held';
  /** Fences (fenced commits) running on this lock now: the watchdog leaves it to them. */
  fencesInProgress = 0;
  /** The open transaction the lock lives in, for strategies `heldByOpenTransaction`. */
  transaction: LockTransaction | undefined;
  /** Taken inside, or enlisted in, a fenced transaction of its call chain: it ends with that transaction's commit. */
  endsWithTransaction = false;
  /** What metrics call it (`lock.name`): set by the runtime from the caller's options. */
  name = UNNAMED_LOCK;
  /**
   * Row-lock: writes its audit rows in the transaction about to commit (it has no live log rows to
   * end there); `andCommit`: and commits it, in one round trip where the store can.
   */
  commitRecord: ((runner: QueryRunner, andCommit: boolean) => Promise<void>) | undefined;
  /** Created on first use: most holders never read their signal, and a controller with its signal costs several µs on every grant. */
  private abort: AbortController | undefined;
  /*
   * A single-key lock's key list, modes and tokens are built when first read (most grants never
   * read them): freezing a fresh object keyed by the key costs a grant about 10 µs on a cold CPU.
   */
  private keyList: readonly string[] | undefined;
  private modeMap: Readonly<Record<string, LockMode>> | undefined;
  private tokenMap: Readonly<Record<string, number>> | undefined;
  private extending: Promise<void> | undefined;

  constructor(
    private readonly host: HeldLockHost,
    readonly strategy: LockStrategyName,
    /** Acquisition id: the `owner` of every log row of this lock. */
    readonly acquisitionId: string,
    readonly targets: readonly LockTarget[],
    rows: readonly GrantedRow[],
    public leaseMs: number,
    /** performance.now() from which the lease surely counts on the server (no later than the grant's insert). */
    leaseFrom: number,
    /** performance.now() of the grant. */
    readonly grantedAt: number,
    readonly waitedMs: number,
    internal = false,
  ) {
    // Plain loops rather than map/fromEntries/spread: this runs on every grant, and most grants are of one key.
    if (targets.length === 1 && rows.length <= 1) {
      // One key: its key list, modes and tokens are built when first read (see the getters below).
      const target = targets[0]!;
      const row = rows[0]?.storedKey === target.storedKey ? rows[0] : undefined;
      this.mode = target.mode;
      this.fencingToken = row?.fencingToken ?? 0;
      this.rowIds = row?.id ? Object.freeze([row.id]) : NO_ROW_IDS;
      this.expiresAt = new Date(rows.length === 1 ? rows[0]!.expiresAt.getTime() : Infinity);
      this.leaseFrom = leaseFrom;
      this.internal = internal;
      return;
    }
    const keys: string[] = [];
    const modes: Record<string, LockMode> = {};
    const tokens: Record<string, number> = {};
    const ids: string[] = [];
    let mode: LockMode = 'read';
    for (const target of targets) {
      keys.push(target.key);
      modes[target.key] = target.mode;
      if (target.mode === 'write') mode = 'write';
      const row = rows.find((r) => r.storedKey === target.storedKey);
      tokens[target.key] = row?.fencingToken ?? 0;
      if (row?.id) ids.push(row.id); // a row-lock has no log row while held
    }
    this.keyList = Object.freeze(keys);
    this.mode = mode;
    this.modeMap = Object.freeze(modes);
    this.tokenMap = Object.freeze(tokens);
    this.fencingToken = tokens[keys[0]!]!;
    this.rowIds = Object.freeze(ids);
    let expiresAt = Infinity;
    for (const row of rows) expiresAt = Math.min(expiresAt, row.expiresAt.getTime());
    this.expiresAt = new Date(expiresAt);
    this.leaseFrom = leaseFrom;
    this.internal = internal;
  }

  get keys(): readonly string[] {
    return (this.keyList ??= sharedOf(this.targets[0]!).keys);
  }

  get modes(): Readonly<Record<string, LockMode>> {
    return (this.modeMap ??= sharedOf(this.targets[0]!).modes);
  }

  get fencingTokens(): Readonly<Record<string, number>> {
    return (this.tokenMap ??= Object.freeze({ [this.targets[0]!.key]: this.fencingToken }));
  }

  /** The token of one of its keys (0 for a key it does not hold), without building fencingTokens. */
  tokenOf(key: string): number {
    if (this.tokenMap === undefined) return key === this.targets[0]!.key ? this.fencingToken : 0;
    return this.tokenMap[key] ?? 0;
  }

  /**
   * Aborts when the lock is lost. Reading `aborted` (or `throwIfAborted()`) also checks the local
   * deadline: a process stalled inside a callback (a blocked event loop, SIGSTOP) runs the I/O
   * callbacks of that loop turn before its timers, the watchdog's deadline timer included, so an
   * answer that arrives right after the stall would otherwise see a signal not yet aborted although
   * the database may already have let another holder in.
   */
  get signal(): AbortSignal {
    if (this.abort) return this.abort.signal;
    this.abort = new AbortController();
    const signal = this.abort.signal;
    const checked = (): boolean => {
      if (this.state === 'held' && performance.now() >= this.localDeadline) this.host.overdue?.(this);
      return abortedOf.call(signal) as boolean;
    };
    Object.defineProperty(signal, 'aborted', { get: checked, configurable: true });
    signal.throwIfAborted = () => {
      if (checked()) throw signal.reason;
    };
    return signal;
  }

  get manager(): EntityManager | undefined {
    return this.transaction?.runner.manager;
  }

  get released(): boolean {
    return this.state === 'released' || this.state === 'lost';
  }

  get live(): boolean {
    return this.state === 'held';
  }

  /** `live`, the local deadline checked first (after a stall its timer may not have run yet): what is decided now agrees with the signal. */
  get liveNow(): boolean {
    if (this.state === 'held' && performance.now() >= this.localDeadline) this.host.overdue?.(this);
    return this.state === 'held';
  }

  /** performance.now() at which the database may already consider the lease run out: the signal aborts then. */
  get localDeadline(): number {
    if (this.leaseMs === Infinity) return Infinity; // row-lock: no lease
    return this.leaseFrom + this.leaseMs - signalMarginMs(this.leaseMs);
  }

  release(): Promise<void> {
    return this.host.release(this, false);
  }

  /** Releases with status FAILED when `failed` (the business work behind it failed). */
  releaseAs(failed: boolean): Promise<void> {
    return this.host.release(this, failed);
  }

  /** One extend after another: the lease this process counts is the one the database ran last. */
  extend(leaseMs?: number): Promise<void> {
    const next = this.extending ? this.extending.then(() => this.host.extend(this, leaseMs)) : this.host.extend(this, leaseMs);
    this.extending = next.catch(() => undefined);
    return next;
  }

  /** Marks the lock lost and aborts its signal with the reason. Idempotent. */
  markLost(reason: Error): void {
    if (this.state === 'held' || this.state === 'releasing') this.state = 'lost';
    const abort = (this.abort ??= new AbortController());
    if (!abort.signal.aborted) abort.abort(reason);
  }

  /** Marks the lock released (signal not aborted: nothing went wrong). */
  markReleased(): void {
    this.state = 'released';
  }
}

/** AbortSignal's own `aborted` getter, for a signal whose `aborted` checks the deadline first (see HeldLock.signal). */
const abortedOf = Object.getOwnPropertyDescriptor(AbortSignal.prototype, 'aborted')!.get!;

/** Earliest of several dates. */
export function minDate(dates: readonly Date[]): Date {
  return new Date(Math.min(...dates.map((d) => d.getTime())));
}

const NO_ROW_IDS: readonly string[] = Object.freeze([]);
const perTarget = new WeakMap<LockTarget, { keys: readonly string[]; modes: Readonly<Record<string, LockMode>> }>();
/** A single-key lock's frozen key list and modes: the same for every lock of that target. */
function sharedOf(target: LockTarget): { keys: readonly string[]; modes: Readonly<Record<string, LockMode>> } {
  let shared = perTarget.get(target);
  if (shared === undefined)
    perTarget.set(target, (shared = { keys: Object.freeze([target.key]), modes: Object.freeze({ [target.key]: target.mode }) }));
  return shared;
}
