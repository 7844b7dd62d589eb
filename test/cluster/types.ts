/** What the cluster suite's parent and its workers say to each other. */

/**
 * - `withLock`: read, sleep, write the counter under `locks.withLock` (lease); the write is a short
 *   transaction of its own, sent only while the lock's signal is not aborted;
 * - `fenced`: the same in a decorated method (lease, fenced REQUIRES_NEW transaction);
 * - `rowLock`: the same in a decorated method with the row-lock strategy (its own transaction);
 * - `hold`: withLock that only holds the lock for a while (no business write): its holder's belief
 *   (from the grant to the release or the signal's abort) is what is checked;
 * - `unlocked`: the negative control, the read-sleep-write with no lock at all;
 * - `mixed`: withLock, fenced and rowLock in turn on one key (lease and row-lock holders exclude
 *   each other through the log rows);
 * - `heartbeat`: no lock, no section: an autocommit UPDATE of the worker's own row every 100 ms,
 *   timed, to see how long the worker's commits froze when a node died.
 */
export type SectionKind = 'withLock' | 'fenced' | 'rowLock' | 'hold' | 'unlocked' | 'mixed' | 'heartbeat';

export interface LoopSpec {
  readonly kind: SectionKind;
  /** Lock key, also the counter row's key. */
  readonly key: string;
  /** Concurrent callers in each worker. */
  readonly callers: number;
  /** Lease of the lock ('long': the module's, 'short': shorter than a node-death freeze). */
  readonly lease: 'long' | 'short';
  /** Pause between the read and the write (or the hold), in ms. */
  readonly gapMs: number;
}

export interface WorkerSettings {
  readonly name: string;
  readonly node: number;
  readonly port: number;
  readonly database: string;
  readonly longLeaseMs: number;
  readonly shortLeaseMs: number;
  readonly timeoutMs: number;
  /**
   * Negative control: the library's cluster path is switched off in this process (its grants go
   * as one multi-statement batch and their answer is trusted, as on a single server).
   */
  readonly unsafeBatch: boolean;
}

/** A withLock/hold holder's own view: from when its work started to its release or its signal's abort (wall clock, ms). */
export interface Belief {
  readonly key: string;
  readonly token: number;
  readonly from: number;
  readonly to: number;
  readonly worker: string;
}

export interface ErrorSample {
  readonly tag: string;
  readonly key: string;
  readonly at: number;
  readonly message: string;
}

export interface LoopReport {
  readonly worker: string;
  readonly node: number;
  /** Sections that returned normally, by kind. */
  readonly sections: Record<string, number>;
  /** Errors callers saw, by tag: `Class/reason/driver code` for library errors, `business/...` for the section's own queries, `UNTYPED/...` otherwise. */
  readonly errors: Record<string, number>;
  /** Every error with its time (wall clock ms), for the tally during the node kill. */
  readonly errorLog: ErrorSample[];
  /** Wall clock (ms) of every successful section's end. */
  readonly completions: number[];
  /** Heartbeat commits that took longer than 500 ms: [wall clock ms at the end, ms taken]. */
  readonly stalls: [number, number][];
  /** Longest call (request to return), ms, and when it ended. */
  readonly longestCallMs: number;
  readonly longestCallEnd: number;
  readonly beliefs: Belief[];
}

export type ParentMessage =
  | { type: 'run'; loops: LoopSpec[]; phase: string }
  | { type: 'stop' }
  | { type: 'janitor' }
  | { type: 'close' };

export type WorkerMessage =
  | { type: 'ready' }
  | { type: 'fatal'; error: string }
  | { type: 'report'; report: LoopReport }
  | { type: 'janitor'; result: unknown; error?: string };
