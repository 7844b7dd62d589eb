import type { FencedTransaction } from '../core/fenced-transaction.js';
import type { LockLostError } from '../errors/lock-lost.error.js';
import type { HeldLock } from '../core/held-lock.js';
import type { LockTarget } from '../core/lock-key.js';
import type { LockMode } from '../core/lock-mode.js';
import type { EndStatus, LockStatus } from '../core/lock-status.js';
import type { LockIsolationLevel } from '../core/locked-call.options.js';
import type { LockStrategyName } from './lock-strategy-name.js';

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
  /** Isolation of the lock's own transaction, for strategies whose lock is one. */
  readonly isolationLevel?: LockIsolationLevel;
  /** See Waiter.onSent. */
  readonly onSent?: () => void;
}

/**
 * What a strategy reports for one try: a lock, or why not (`failure`: no verdict, e.g. the
 * connection broke; nothing is held; it becomes the caller's error `cause` if the budget runs out).
 */
export type AttemptResult = { readonly lock: HeldLock; readonly reclaimed: number } | { readonly lock?: undefined; readonly failure?: unknown };

/** What the shared code asks of a strategy instead of comparing its name. */
export interface StrategyCapabilities {
  /** The lock is an open transaction of the app's DataSource, and the locked work runs in it (`HeldLock.transaction`). */
  readonly heldByOpenTransaction: boolean;
  /** A nested call inside the chain's open fenced transaction takes its keys in that transaction (`grantWithin`). */
  readonly joinsOpenTransaction: boolean;
  /** Its locks live as long as the process lease is renewed (the watchdog keeps them). */
  readonly renewedByProcessLease: boolean;
  /**
   * Each caller waits in the database itself (its locking statement blocks until granted), so a
   * process's callers of one key are not lined up behind one poller: the server sees them all and
   * hands the key over in its own order, within a process as across processes.
   */
  readonly queuesInServer: boolean;
}

/**
 * The seam between the shared runtime (wait queues, reentrancy, events, shutdown) and one way of
 * holding a lock. A strategy owns "one try", "give it back" and its per-lock state; the store
 * below it owns every statement.
 */
export interface LockStrategy {
  readonly name: LockStrategyName;
  readonly capabilities: StrategyCapabilities;
  /**
   * True when a live conflicting lock of this process makes a try pointless (waiters wait for the
   * local release); false when the database queues waiters itself, so asking is waiting.
   */
  waitsForLocalRelease(conflicting: HeldLock): boolean;
  /** True when readers give way to writers (writer preference) and the database cannot see a writer of this process that waits locally. */
  readonly readersYieldToLocalWriters?: boolean;
  /** One try; may wait in the database, never past `attempt.deadline`. */
  tryGrant(attempt: GrantAttempt): Promise<AttemptResult>;
  /** True when a try for `targets` would wait in the database before it asks (a doorbell): the caller then waits in the local queue. */
  waitsAtOnce?(targets: readonly LockTarget[]): boolean;
  /** Pause before the next try after `failedTries` failed ones, in ms. */
  retryDelay(failedTries: number): number;
  /**
   * Gives the lock back with `status`.
   * @throws LockLostError when someone else had ended its rows first.
   */
  release(lock: HeldLock, status: EndStatus | typeof LockStatus.EXPIRED, note?: string): Promise<void>;
  /** A new lease from now; false, or the loss explained, if someone else had ended its rows. */
  extend(lock: HeldLock, leaseMs: number): Promise<boolean | LockLostError>;
  /** With `joinsOpenTransaction`: takes the keys inside the chain's open fenced transaction. */
  grantWithin?(transaction: FencedTransaction, attempt: GrantAttempt): Promise<AttemptResult>;
  /** The lock ended without this strategy releasing it (in a fenced commit, or lost): local clean-up only. */
  dropped(lock: HeldLock): void;
  /** Shutdown: tries waiting in the database are cut, so that nobody waits out their budget (their callers hear of the shutdown). */
  cancelTries?(): void;
  /** Stops background work and frees what it keeps (open transactions). */
  close(): Promise<void>;
}
