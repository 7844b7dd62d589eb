import type { QueryRunner } from 'typeorm';
import type { GrantedRow } from '../core/held-lock.js';
import type { LockInfo } from '../core/lock-handle.js';
import type { LockTarget } from '../core/lock-key.js';
import type { EndStatus, LockStatus } from '../core/lock-status.js';
import type { LockStrategyName } from '../strategies/lock-strategy-name.js';
import type { ForcedReleaseHolder, LockList } from './admin.js';
import type { Bell, BellWait, DoorbellStore } from './doorbell-store.js';

/**
 * The seam between the library and one database. Strategies, the fence, the watchdog, the
 * janitor and the admin calls go through it; each database implements it in a folder of its own
 * (store/mysql/) holding all of its SQL. Every method throws LockStatementError on failure.
 * Split by who calls it, so each caller sees only what it needs.
 */
export interface LockStore {
  /** The strategies this store serves (the module refuses the others at start, and calls naming them). */
  readonly strategies: ReadonlySet<LockStrategyName>;
  readonly log: LockLogStore;
  readonly processLease: ProcessLeaseStore;
  readonly fence: FenceStore;
  readonly rowLocks: RowLockStore;
  /** undefined where the database has no session-scoped named locks that all its nodes share. */
  readonly doorbells: DoorbellStore | undefined;
  readonly janitor: JanitorStore;
  readonly admin: AdminStore;
  /** Round trips sent so far, by purpose (doorbells included). */
  readonly roundTrips: Readonly<Record<RoundTripPurpose, number>>;
  /** Connections of the app's DataSource pool (row-lock sessions and fenced transactions come from it). */
  dataSourcePoolSize(): number;
  /** Stops background work of the store and closes every connection it opened. */
  close(): Promise<void>;
}

/** What a round trip is for: `stats().roundTripsBy` reports each, so tests can leave out background traffic. */
export type RoundTripPurpose = 'locks' | 'renewals' | 'janitor' | 'admin';

/** One grant try as a strategy asks it: all keys or none. */
export interface GrantRequest {
  readonly acquisitionId: string;
  readonly strategy: LockStrategyName;
  readonly targets: readonly LockTarget[];
  readonly leaseMs: number;
  readonly waitedMs: number;
  /** > 0: when not granted, mark write keys "writer waiting" for this long (holds back new readers). */
  readonly writerWaitMarkMs: number;
  /** Read grants respect other writers' "writer waiting" marks. */
  readonly writerPreference: boolean;
  /** Lease: the key's doorbell name; refused while another session has the bell (a waiter queued first). */
  readonly doorbell?: string;
  /**
   * performance.now() past which no connection of the library's pool is waited for: the caller's
   * own deadline (an answer may come later, within the grant's grace). Undefined: the grant's deadline.
   */
  readonly connectBy?: number;
  /** Called once the grant's first round trip is on the wire (see Waiter.onSent). */
  readonly onSent?: () => void;
}

export type GrantOutcome =
  | {
      readonly granted: true;
      readonly rows: readonly GrantedRow[];
      readonly reclaimed: number;
      /** Server time from the grant's first statement to the log rows' insert (waits on locks); 0 if not measured. */
      readonly serverWaitMs: number;
      /** When the grant's first statement started, by the server clock (multi-key plans only). */
      readonly serverStartedAt?: Date;
    }
  | { readonly granted: false; readonly reason: 'busy' | 'writer-waiting' | 'expired-holders' | 'missing-key-rows' }
  /** A semaphore's permit asked with a limit other than the one its live permits are in use with (nothing written). */
  | { readonly granted: false; readonly reason: 'limit-mismatch'; readonly currentLimit: number };

/** A grant answer, with when it was sent and (lease) the doorbell wait's result. */
export type GrantAnswer = GrantOutcome & { sentAt?: number; before?: unknown };

/** The lock log: grants and the rows of held locks. */
export interface LockLogStore {
  /** This process's process-lease id, written on every row it grants. */
  readonly processId: string;
  /**
   * One grant try: a free key costs one round trip; missing key rows and expired holders one more
   * each, only when met. Whatever a try of unknown outcome may have committed is given back.
   * `bell`: sent through the doorbell's connection (a wait for it first, in the same round trip).
   */
  grant(request: GrantRequest, deadline: number, options?: { bell?: Bell | BellWait; serverBoundMs?: number }): Promise<GrantAnswer>;
  /**
   * Creates missing key rows in their own transaction (first use of a key, or after a reap). Lock
   * waits end at `deadline`; the answer is given KEY_ROWS_ANSWER_MS more. A row another open
   * transaction is creating may be left to it: the caller's take finds it missing, as for a busy key.
   */
  createKeyRows(keys: readonly Buffer[], deadline?: number): Promise<void>;
  /**
   * Ends the rows still live; returns how many. Retried through transient failures; if the
   * database stays out of reach the end is owed (settled before the next process-lease renewal).
   * `bell`: the release goes on the bell's connection and rings it, one round trip. `heldMs`: the hold as its holder measured it (else the server works it out).
   */
  endRows(rowIds: readonly string[], status: EndStatus | typeof LockStatus.EXPIRED, note?: string, bell?: Bell, heldMs?: number): Promise<number>;
  /** A new lease from now; returns the rows still live. */
  extend(rowIds: readonly string[], leaseMs: number): Promise<{ storedKey: string; expiresAt: Date }[]>;
  rowStatuses(rowIds: readonly string[]): Promise<{ id: string; storedKey: string; status: string; note: string | null }[]>;
}

/** The watchdog's view: one renewal keeps every lock of the process alive. */
export interface ProcessLeaseStore {
  /** Renews the process lease (ends still owed go first); `endedCount` grows when someone ended one of our rows. */
  renew(deadline: number): Promise<{ endedCount: string; created: boolean }>;
  /** Of these rows, the ones no longer live. */
  endedAmong(rowIds: readonly string[]): Promise<Set<string>>;
}

/**
 * Transaction control of the library's own transactions on the app's DataSource (row-lock holds,
 * fenced calls): as TypeORM's startTransaction() and commitTransaction(), at less client cost.
 */
export interface SessionTransactions {
  /** Opens a transaction on `runner` at `isolationLevel` (else the DataSource's, else the server's default). */
  begin(runner: QueryRunner, isolationLevel?: string): Promise<void>;
  commit(runner: QueryRunner): Promise<void>;
}

/** Writes of the fence, inside the business transaction just before COMMIT; each returns the rows it wrote. */
export interface FenceStore extends SessionTransactions {
  /** The lock ends with this commit: its live rows become RELEASED. */
  endInCommit(runner: QueryRunner, rowIds: readonly string[], owner: string): Promise<number>;
  /**
   * A lock of one row ends with this commit: its row becomes RELEASED and the transaction commits,
   * in one round trip where the database can. False if the row was no longer live: nothing was
   * committed and the transaction is still open (the caller rolls back).
   */
  endAndCommit(runner: QueryRunner, rowId: string, owner: string): Promise<boolean>;
  /** The lock outlives the commit: its live rows are written (COMPLETED), so a takeover is ordered against us. */
  fenceKept(runner: QueryRunner, rowIds: readonly string[], owner: string): Promise<number>;
  /** True when a work statement on `runner` that failed with `error` ended its whole transaction for good (a deadlock outside any savepoint). */
  rollsBackTransaction(error: unknown, runner: QueryRunner): boolean;
  /** Ends the transaction's session under the work (see RowLockStore.cutSession): its later statements fail. */
  cutSession(runner: QueryRunner): void;
}

/** What one take of row-lock keys found. */
export type RowLockTake =
  | { readonly taken: true; readonly tokens: ReadonlyMap<string, number> }
  | {
      readonly taken: false;
      /** 'rolled-back': a deadlock ended the whole transaction the take ran in, whatever else it held (MySQL rolled it back; PostgreSQL aborted it, and the store does not go on from its savepoint). */
      readonly why: 'missing-key-rows' | 'busy' | 'lease-holder' | 'check-log' | 'rolled-back';
      /** Busy because the wait was cut (bound, KILL QUERY), or rolled back: the driver's error, for the caller. */
      readonly cause?: unknown;
    };

/** One audit row of a row-lock hold, written terminal once its end is known. */
export interface RowLockAuditRow {
  readonly key: Buffer;
  readonly mode: LockTarget['mode'];
  readonly owner: string;
  readonly fencingToken: number;
  readonly status: EndStatus | typeof LockStatus.EXPIRED;
  readonly waitedMs: number;
  /** How long it was held, measured by the holder. */
  readonly holdMs: number;
  readonly note: string | null;
}

/**
 * The row-lock strategy's statements: the lock is the business transaction itself, an open
 * transaction of the app's DataSource that holds the keys' row locks until it ends.
 */
export interface RowLockStore extends SessionTransactions {
  /**
   * Takes the keys in `runner`'s open transaction, in key order, waiting in the server at most
   * until `deadline` (Infinity: the server's own lock wait bound): writers bump each key's token,
   * readers read it. One statement for a key only row-locks have used since its last row-lock
   * writer; 'check-log' when a lease holder may be live (the caller then calls takeChecked);
   * 'busy' when the wait ran out.
   */
  take(runner: QueryRunner, targets: readonly LockTarget[], deadline: number): Promise<RowLockTake>;
  /**
   * Opens the hold's transaction on `runner` (at `isolationLevel`, else the server's default) and
   * takes the keys in it, as begin() then take() do; a single write key in one round trip where the
   * database can. The transaction is open afterwards whatever the answer, for the caller to use or
   * roll back.
   */
  beginAndTake(runner: QueryRunner, targets: readonly LockTarget[], deadline: number, isolationLevel?: string): Promise<RowLockTake>;
  /**
   * Rare path: the rows locked first, then the lease holders of the keys read where the caller's
   * transaction cannot hide them (expired ones taken over), then the keys taken. 'lease-holder'
   * when one is live; 'missing-key-rows' on a key's first use.
   */
  takeChecked(runner: QueryRunner, targets: readonly LockTarget[], deadline: number, acquisitionId: string): Promise<RowLockTake>;
  /**
   * `take` inside a transaction the take cannot roll back (a joined one): the rows of keys this
   * process has not seen yet are created first, outside it (see KeyRowsFirst), so that the take
   * never locks a gap where a row is missing.
   */
  takeJoined(runner: QueryRunner, targets: readonly LockTarget[], deadline: number): Promise<RowLockTake>;
  /** Creates missing key rows for a take that joined `runner`'s transaction (which it cannot roll back): inside it (MySQL's gap locks), or apart. */
  createKeyRowsIn(runner: QueryRunner, keys: readonly Buffer[], deadline: number): Promise<RowLockTake | undefined>;
  /** The hold's audit rows, in the transaction that is about to commit. */
  recordInCommit(runner: QueryRunner, rows: readonly RowLockAuditRow[]): Promise<void>;
  /**
   * The hold's audit rows and COMMIT, in one round trip where the database can: either both are in
   * the commit or neither is (an error; the transaction is then still open for the caller's rollback).
   */
  recordAndCommit(runner: QueryRunner, rows: readonly RowLockAuditRow[]): Promise<void>;
  /** Audit rows of holds that did not commit, on the library's own connections (retried briefly). */
  recordEnded(rows: readonly RowLockAuditRow[]): Promise<void>;
  /**
   * Ends the session under running work: its statements fail from now on and the server rolls it
   * back. Never a ROLLBACK: a statement the work sends after it would run in autocommit, outside
   * any lock. Resolves once the server has ended the session (a statement it was running ends
   * first, its row locks with it), or after a bound; never rejects.
   */
  cutSession(runner: QueryRunner): Promise<void>;
  /** Resolves once every session cut so far has ended on the server (each within cutSession's bound). */
  cutSessionsGone(): Promise<void>;
  /** Watches the session's connection; `onClose` when it closes. Returns the unwatch function. */
  watchSession(runner: QueryRunner, onClose: (error?: unknown) => void): () => void;
}

/** The janitor's batches; each touches at most `batchSize` rows. */
export interface JanitorStore {
  /**
   * Expires live rows whose lease ran out, oldest first, from above `afterId` on; returns how many
   * candidates it found, how many it expired, their keys, how many it skipped (rows someone keeps
   * locked), and the last candidate's id, where the next batch starts.
   */
  reclaimExpired(
    batchSize: number,
    afterId?: string,
  ): Promise<{ candidates: number; count: number; keys: string[]; lastId?: string; skipped?: number }>;
  /** Deletes ended rows older than the retention. */
  prune(retentionMs: number, batchSize: number): Promise<number>;
  /** Deletes idle key rows (and their row-lock rows); returns candidates found and keys reaped, or that the fencing floor was in use (nothing reaped: a later run does it). */
  reapIdleKeys(idleMs: number, batchSize: number): Promise<{ candidates: number; reaped: number; floorBusy?: boolean }>;
  /** Deletes process-lease rows of processes long gone. */
  reapProcesses(idleMs: number, batchSize: number): Promise<void>;
}

/** Operator reads and evictions, strategy-neutral (every strategy writes the same log rows). */
export interface AdminStore {
  inspect(key: string, storedKey: Buffer): Promise<LockInfo>;
  listLocks(namespace: string, limit: number, after: string): Promise<LockList>;
  /** Ends every live row of every acquisition holding `key`, with `note`; returns the holders evicted. */
  forceRelease(key: Buffer, note: string): Promise<ForcedReleaseHolder[]>;
}
