import type { LockMode } from './lock-mode.js';

/** A granted lock. Obtained from `LockService.acquire()` / `tryAcquire()` / `withLock()`. */
export interface LockHandle {
  /** The keys held, as given (without namespace), in the global lock order. */
  readonly keys: readonly string[];
  /** 'write' if any key is held for writing, else 'read'. See `modes` for mixed locks. */
  readonly mode: LockMode;
  /** Mode per key. */
  readonly modes: Readonly<Record<string, LockMode>>;
  /**
   * Fencing token of the first key: grows on every grant of that key, never reset. Pass it to
   * systems outside the database so they can refuse a stale holder's writes.
   */
  readonly fencingToken: number;
  /** Fencing token per key. */
  readonly fencingTokens: Readonly<Record<string, number>>;
  /** When the lease ends unless renewed (server clock, UTC). The watchdog keeps pushing it. */
  readonly expiresAt: Date;
  /** Aborted when the lock is lost (taken over, not renewable, or held past maxHoldMs). */
  readonly signal: AbortSignal;
  /** True for a nested acquisition of a key this call chain already held: it costs no SQL. */
  readonly reentrant: boolean;
  /** True once released (or found lost on release). */
  readonly released: boolean;
  /**
   * Gives the lock back. Throws LockLostError if it had been taken over meanwhile (the new
   * holder is not touched). Calling it twice is a no-op.
   */
  release(): Promise<void>;
  /** Restarts the lease from now for `leaseMs` (default: the lease it was taken with). */
  extend(leaseMs?: number): Promise<void>;
}

/** What `inspect(key)` reports. */
export interface LockInfo {
  readonly key: string;
  /** null when nobody holds it. */
  readonly mode: LockMode | null;
  readonly holders: readonly LockHolderInfo[];
  /** Latest lease end among the holders (server clock), null when free. */
  readonly expiresAt: Date | null;
  /** The key's fencing counter: the token of its latest grant (0 if never granted). */
  readonly fencingToken: number;
  /** The database server's clock when it answered. */
  readonly serverTime: Date;
}

export interface LockHolderInfo {
  readonly mode: LockMode;
  /** Acquisition token (log row owner). */
  readonly owner: string;
  /** Process that holds it, host:pid. */
  readonly holder: string;
  readonly fencingToken: number;
  readonly acquiredAt: Date;
  readonly expiresAt: Date;
}
