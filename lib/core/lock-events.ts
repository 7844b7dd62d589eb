import type { LockMode } from './lock-mode.js';

/** What happened to a lock. */
export type LockEventType = 'acquired' | 'released' | 'renewed' | 'renewal-failed' | 'lost' | 'reclaimed' | 'timed-out' | 'skipped';

/** One lock event, handed to `onEvent` synchronously. Durations in ms. */
export interface LockEvent {
  /** What happened. */
  readonly type: LockEventType;
  /** Keys as the caller wrote them (without namespace). */
  readonly keys: readonly string[];
  /** The lock's mode ('write' for events about several locks, such as renewals). */
  readonly mode: LockMode;
  /** Fencing token of the first key, when one was granted. */
  readonly fencingToken?: number;
  /** Time spent waiting before the grant (acquired, timed-out). */
  readonly waitedMs?: number;
  /** Time the lock was held (released, lost). */
  readonly heldMs?: number;
  /** How many holders a renewal or a reclaim covered. */
  readonly count?: number;
  /** The cause (lost, renewal-failed). */
  readonly error?: unknown;
}

/** Receives every lock event, synchronously; its exceptions are logged and never rethrown. */
export type LockEventListener = (event: LockEvent) => void;
