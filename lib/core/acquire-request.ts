import type { LockStrategyName } from '../strategies/lock-strategy-name.js';
import type { HeldLock } from './held-lock.js';
import type { LockTarget } from './lock-key.js';
import type { LockMode } from './lock-mode.js';
import { UNNAMED_LOCK } from './lock-request.js';
import type { LockIsolationLevel } from './locked-call.options.js';
import type { Waiter } from './wait-queue.js';

/** What the call chain asks the runtime for. */
export interface AcquireRequest {
  readonly targets: readonly LockTarget[];
  readonly mode: LockMode;
  readonly strategy: LockStrategyName;
  readonly timeoutMs: number;
  readonly leaseMs: number;
  readonly maxAttempts: number;
  /** The caller reports a timeout itself (a skipped job): no 'timed-out' event, no timedOut count. */
  readonly quietTimeout?: boolean;
  /** The library's own lock (the janitor's): never counted or announced. */
  readonly internal?: boolean;
  /** Called at most once, as soon as the keys are known not to be granted at once (see Waiter.onWaiting). */
  readonly onWaiting?: () => void;
  /** Called when a try's grant is on the wire (see Waiter.onSent). */
  readonly onSent?: () => void;
  /** What metrics call the lock (`lock.name`). Default 'unnamed'. */
  readonly name?: string;
  /** Isolation of the lock's own transaction, for strategies whose lock is one (the caller's, if it named one). */
  readonly isolationLevel?: LockIsolationLevel;
}

/** What keeps granted locks alive: the watchdog, renewing the process lease. */
export interface LeaseKeeper {
  add(lock: HeldLock): void;
  remove(lock: HeldLock): void;
  stop(): void;
  readonly size: number;
}

/** A waiter's state before a queue settles it. */
export type FreshWaiter = Omit<Waiter<HeldLock>, 'resolve' | 'reject'>;

/** A fresh waiter's state for `request`, started at `startedAt`. */
export function newWaiter(request: AcquireRequest, startedAt: number): FreshWaiter {
  return {
    targets: request.targets,
    mode: request.mode,
    leaseMs: request.leaseMs,
    maxAttempts: request.maxAttempts,
    quietTimeout: request.quietTimeout === true,
    internal: request.internal === true,
    name: request.name ?? UNNAMED_LOCK,
    strategy: request.strategy,
    isolationLevel: request.isolationLevel,
    onSent: request.onSent,
    deadline: startedAt + request.timeoutMs,
    startedAt,
    tries: 0,
    refusals: 0,
    inFlight: false,
    settled: false,
  };
}
