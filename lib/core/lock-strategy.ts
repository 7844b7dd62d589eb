import type { EndStatus } from '../mysql/sql.js';
import type { FencedTransaction } from './fenced-transaction.js';
import type { HeldLock } from './held-lock.js';
import type { LockTarget } from './lock-key.js';
import type { LockMode } from './lock-mode.js';
import type { LockStrategyName } from './lock-strategy-name.js';
import type { LockIsolationLevel } from './locked-call.options.js';

/** One try for one waiter, as the shared wait queue hands it to a strategy. */
export interface GrantAttempt {
  readonly targets: readonly LockTarget[];
  readonly mode: LockMode;
  readonly leaseMs: number;
  /** Most tries the caller allows. */
  readonly maxAttempts: number;
  /** performance.now() when the caller started waiting, and when it gives up (Infinity: never). */
  readonly startedAt: number;
  readonly deadline: number;
  /** Tries already made for this waiter (some answered locally), and how many the database refused. */
  readonly tries: number;
  readonly refusals: number;
  /** The library's own lock (the janitor's). */
  readonly internal: boolean;
  /** Row-lock: isolation of the lock's own transaction (the locked work runs in it). */
  readonly isolationLevel?: LockIsolationLevel;
}

/** What a strategy reports back for one try. */
export type AttemptResult =
  | { readonly lock: HeldLock; readonly reclaimed: number }
  | {
      readonly lock?: undefined;
      /**
       * Why not: the key is held ('busy'), or the try could not reach a verdict (`failure`: the
       * connection broke, the server was unreachable; nothing is held). The last failure becomes
       * the `cause` of the caller's error if its budget runs out.
       */
      readonly failure?: unknown;
    };

/**
 * The seam between the shared runtime (wait queues, reentrancy, events, shutdown) and the ways a
 * lock can be held. Lease and row-lock differ in where the lock lives (a leased log row vs a row
 * lock kept by an open transaction) and in order (lease: grant, then a new business transaction,
 * then the fence; row-lock: the business transaction is opened first and takes the lock itself),
 * so a strategy owns "one try" and "give it back", and a row-lock holder brings the transaction
 * its fenced call runs in.
 * Inspect and the admin calls read the log rows both strategies write, so they live below the
 * seam (lock-log/), strategy-neutral.
 */
export interface LockStrategy {
  readonly name: LockStrategyName;
  /**
   * True when a live conflicting lock of this same process makes a try pointless, so waiters
   * wait for the local release instead of asking (lease); false when the server queues waiters
   * itself (row-lock), so asking is how one waits.
   */
  waitsForLocalRelease(conflicting: HeldLock): boolean;
  /** One try; may wait in the database, never past `attempt.deadline`. */
  tryGrant(attempt: GrantAttempt): Promise<AttemptResult>;
  /** Pause before the next try after `failedTries` failed ones, in ms. */
  retryDelay(failedTries: number): number;
  /**
   * Gives the lock back with `status`: ends its live log rows (and, row-lock, commits or rolls
   * back its transaction).
   * @throws LockLostError when someone else had ended its rows first (the lock was lost).
   */
  release(lock: HeldLock, status: EndStatus | 'EXPIRED', note?: string): Promise<void>;
  /** A new lease from now; false if the lock was found taken over. */
  extend(lock: HeldLock, leaseMs: number): Promise<boolean>;
  /**
   * Row-lock only: takes the keys inside an open fenced transaction of the call chain (a nested
   * call joins it: a second connection could wait forever for row locks the first one holds).
   */
  grantWithin?(transaction: FencedTransaction, attempt: GrantAttempt): Promise<AttemptResult>;
  /** The lock ended without this strategy releasing it (its rows ended in a fenced commit, or it was lost): local clean-up only. */
  dropped(lock: HeldLock): void;
  /** Stops background work and frees connections it keeps (doorbells, open transactions). */
  close(): Promise<void>;
}
