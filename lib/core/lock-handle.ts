import type { EntityManager } from 'typeorm';
import type { HolderMode, LockMode } from './lock-mode.js';
import type { LockStrategyName } from '../strategies/lock-strategy-name.js';

/** A granted lock. Obtained from `LockService.acquire()` / `tryAcquire()` / `withLock()`. */
export interface LockHandle {
  /** The keys held, as given (without namespace), in the global lock order. */
  readonly keys: readonly string[];
  /** 'write' if any key is held for writing, else 'read'. See `modes` for mixed locks. */
  readonly mode: LockMode;
  /** Mode per key. */
  readonly modes: Readonly<Record<string, LockMode>>;
  /** How it is held ('lease' or 'row-lock'). */
  readonly strategy: LockStrategyName;
  /**
   * Fencing token of the first key: grows on every grant of that key, never reset. Pass it to
   * systems outside the database so they can refuse a stale holder's writes.
   */
  readonly fencingToken: number;
  /** Fencing token per key. */
  readonly fencingTokens: Readonly<Record<string, number>>;
  /**
   * When the lease ends unless renewed (server clock, UTC), as of the grant or the latest
   * extend(); renewals of this process's process lease keep pushing the real end further. A
   * 'row-lock' has no lease: the latest Date there is.
   */
  readonly expiresAt: Date;
  /**
   * Aborted when the lock is lost: taken over, force-released, not renewable, held past
   * maxHoldMs, or (row-lock) its connection closed. It aborts no later than the moment the
   * database may grant the key to someone else: from the send time of the last confirmed grant or
   * renewal plus the lease, minus a safety margin, without waiting for a late renewal to answer.
   * A 'row-lock' has no lease: its signal aborts when its connection is lost, at maxHoldMs, or at
   * shutdown, never because it stalled.
   */
  readonly signal: AbortSignal;
  /**
   * The EntityManager of the lock's own transaction ('row-lock': the work runs inside the locking
   * transaction and commits when the lock is released); undefined for 'lease' handles.
   */
  readonly manager: EntityManager | undefined;
  /** True for a nested acquisition of a key this call chain already held: it costs no SQL. */
  readonly reentrant: boolean;
  /** True once released (or found lost on release). */
  readonly released: boolean;
  /**
   * Gives the lock back. Throws LockLostError if it had been taken over meanwhile (the new
   * holder is not touched). Calling it twice is a no-op. A 'row-lock' handle commits its
   * transaction here (use `releaseAs(true)`-style rollback through `withLock` instead when the
   * work failed).
   */
  release(): Promise<void>;
  /** Restarts the lease from now for `leaseMs` (default: the lease it was taken with). A no-op for a 'row-lock' (no lease). */
  extend(leaseMs?: number): Promise<void>;
}

/** What `inspect(key)` reports. */
export interface LockInfo {
  /** The key asked about, as the caller wrote it. */
  readonly key: string;
  /** null when nobody holds it. */
  readonly mode: LockMode | null;
  /** Live holders: one writer, or any number of readers. */
  readonly holders: readonly LockHolderInfo[];
  /** Latest lease end among the holders (server clock), null when free. */
  readonly expiresAt: Date | null;
  /** The key's fencing counter: the token of its latest grant (0 if never granted). */
  readonly fencingToken: number;
  /** The database server's clock when it answered. */
  readonly serverTime: Date;
}

/** One live holder of a key, as `inspect()` reports it. */
export interface LockHolderInfo {
  /** Its mode ('permit' for a semaphore's permit). */
  readonly mode: HolderMode;
  /** Acquisition id (the log rows' `owner`): one per acquire, shared by the keys of a multi-key lock. */
  readonly owner: string;
  /** Process that holds it, host:pid. */
  readonly holder: string;
  /** How it holds the key: 'lease' or 'row-lock'. */
  readonly strategy: LockStrategyName;
  /** The fencing token it was granted for this key. */
  readonly fencingToken: number;
  /** When it was granted (server clock). */
  readonly acquiredAt: Date;
  /** When its lease runs out unless its process renews it (server clock). */
  readonly expiresAt: Date;
}
