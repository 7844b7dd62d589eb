import type { LockEventListener } from './core/lock-events.js';
import type { LockStrategyName } from './strategies/lock-strategy-name.js';
import type { EscapedWritesMode } from './integrations/escaped-writes.mode.js';
import type { TransactionHostOption } from './integrations/transaction-host.js';

export { checkDuration, describe, MAX_TIMER_MS } from './core/option-checks.js';
export { MIN_LEASE_MS } from './core/lock-request.js';
export type { EscapedWritesMode } from './integrations/escaped-writes.mode.js';
export type { TransactionHostLike, TransactionHostOption } from './integrations/transaction-host.js';

/** Janitor settings (cluster-wide clean-up job: one node at a time runs it). */
export interface DbLockJanitorOptions {
  /** How often each node tries to run the janitor, in ms. Default 30000. */
  intervalMs?: number;
  /** Terminal log rows older than this are deleted, in ms. Default 604800000 (7 days). */
  logRetentionMs?: number;
  /** Rows touched per statement, so no statement holds row locks for long. Default 1000. */
  batchSize?: number;
  /**
   * Lock-table rows of keys not granted for this long (and with no live holder or waiting writer)
   * are deleted, in ms; Infinity keeps them. Fencing tokens keep growing across a reap. Default 3600000 (1 h).
   */
  idleKeyMs?: number;
}

/** Everything `DbLockModule.forRoot()` / `forRootAsync()`'s factory accepts. */
export interface DbLockModuleOptions {
  /**
   * Prefix for every key, joined with ':' ("billing" + "loan:7" is stored as "billing:loan:7"),
   * so several apps can share the tables. Default '' (no prefix).
   */
  namespace?: string;
  /**
   * How locks are held unless a call says otherwise: 'lease' (a leased log row, no connection
   * held) or 'row-lock' (an InnoDB row lock kept by the locked work's own transaction). Default 'lease'.
   */
  strategy?: LockStrategyName;
  /** Lease of a granted lock, in ms: a crashed holder's lock is free again after this. Default 30000. */
  leaseMs?: number;
  /** Default wait budget of `acquire()`, in ms; 0 = one try, Infinity = wait forever. Default 10000. */
  timeoutMs?: number;
  /** Default most tries of a waiting caller before LockTimeoutError (within timeoutMs); Infinity = no limit. Default Infinity. */
  maxAttempts?: number;
  /**
   * First pause between two tries of a waiting caller, in ms; pauses double up to retryMaxDelayMs and
   * each is jittered to between half and all of its value (waiters in different processes spread out). Default 10.
   */
  retryMinDelayMs?: number;
  /** Longest pause between two tries of a waiting caller, in ms. Default 200. */
  retryMaxDelayMs?: number;
  /** Waiting, holding or releasing longer than this logs a warning, in ms. Default 3000. */
  slowThresholdMs?: number;
  /** How often held leases are renewed, in ms; shorter than leaseMs (a lock whose own lease is no longer is renewed every third of it). Default: a third of the shortest held lease. */
  renewIntervalMs?: number;
  /** A hold longer than this is given up (its signal aborts) even if the process is alive, in ms. Default Infinity. */
  maxHoldMs?: number;
  /**
   * Every connection the library opens per process, all told (never the DataSource's): one
   * renewal lane, the rest shared by grants, releases, admin calls, the janitor and doorbells,
   * which borrow at most `poolSize - 2`. Default 8: a contended key's holder keeps its doorbell
   * and each waiter queues on one, so a process with a few callers on one hot key needs about as
   * many doorbells as callers; with fewer, the rest poll, and hot-key throughput halves.
   */
  poolSize?: number;
  /**
   * While a writer waits, new readers are held back so writers are not starved. `false` lets
   * lease readers barge in as long as any reader holds the key. Row-lock readers always give way:
   * the server queues a new shared row lock behind a waiting exclusive one. Default true.
   */
  writerPreference?: boolean;
  /**
   * Most row-lock callers of this process that may queue for a DataSource connection at once
   * (a count of callers). Row-lock sessions, holders and waiters alike, take at most the
   * DataSource's pool size minus one connection; callers beyond that wait in the process, without
   * a connection, until one frees or their timeoutMs ends (LockTimeoutError). With this bound set,
   * one more queued caller is refused at once with TooManyLockWaitersError. Default: no bound.
   */
  maxRowLockWaiters?: number;
  /** Janitor settings, or `false` to never run it on this node. Default: enabled, see below. */
  janitor?: DbLockJanitorOptions | false;
  /** Called synchronously for every lock event (acquired, released, renewed, lost, ...). Default none. */
  onEvent?: LockEventListener;
  /**
   * At shutdown, how long to wait for running `withLock`/decorated holders before their locks are
   * released anyway (their signals abort), in ms. Default 10000.
   */
  shutdownTimeoutMs?: number;
  /**
   * What happens to a write sent, while a fenced call runs, on another connection of its
   * DataSource (an `@InjectRepository` repository, `dataSource.query`, a REQUIRES_NEW transaction):
   * such a write commits even if the fence rolls back, and waits for the fenced transaction's own
   * row locks if it touches the same rows. Default 'warn'.
   * - 'warn': log one warning per call site naming the fix; such a write that then waits for a row
   *   lock while the fenced transaction holds some is cut after 1 s with EscapedWriteError instead
   *   of hanging on its own transaction's locks (for MySQL's innodb_lock_wait_timeout, 50 s; on
   *   PostgreSQL, whose lock_timeout is unset by default, for ever);
   * - 'error': refuse it with EscapedWriteError before it is sent;
   * - 'ignore': no check at all (writes outside the fence are intended; a self-deadlock waits the server's full lock wait).
   */
  escapedWrites?: EscapedWritesMode;
  /**
   * The @nestjs-cls/transactional TransactionHost whose current transaction a fenced call becomes
   * (`txHost.tx`, repositories from it and nested `@Transactional()` calls then write inside the
   * fence). Default 'auto': every TransactionHost of the app whose TypeORM adapter serves this
   * module's DataSource, found at bootstrap; none if the package is not installed. `false`: never.
   * Or pass one (`useFactory: (txHost: TransactionHost) => ({ transactionHost: txHost })`).
   */
  transactionHost?: TransactionHostOption;
}

/** Options after defaults and validation: what the library runs on. */
export interface ResolvedDbLockOptions {
  /** Key prefix joined with ':' (default ''). */
  readonly namespace: string;
  /** How locks are held unless a call says otherwise (default 'lease'). */
  readonly strategy: LockStrategyName;
  /** Lease of a granted lock, in ms (default 30000). */
  readonly leaseMs: number;
  /** Default wait budget, in ms; 0 one try, Infinity forever (default 10000). */
  readonly timeoutMs: number;
  /** Default most tries within timeoutMs; Infinity: no limit (default Infinity). */
  readonly maxAttempts: number;
  /** First pause between two tries of a waiting caller, in ms (default 10). */
  readonly retryMinDelayMs: number;
  /** Longest pause between two tries of a waiting caller, in ms (default 200). */
  readonly retryMaxDelayMs: number;
  /** Waiting, holding or releasing longer than this logs a warning, in ms (default 3000). */
  readonly slowThresholdMs: number;
  /** How often held leases are renewed, in ms; undefined: a third of the shortest held lease. */
  readonly renewIntervalMs: number | undefined;
  /** A hold longer than this is given up, in ms (default Infinity). */
  readonly maxHoldMs: number;
  /** Connections of the library's own pool (default 8). */
  readonly poolSize: number;
  /** While a writer waits, new readers of that key are held back (default true). */
  readonly writerPreference: boolean;
  /** undefined: no bound on queued row-lock callers. */
  readonly maxRowLockWaiters: number | undefined;
  /** Janitor settings, or false when this node never runs it. */
  readonly janitor: Readonly<Required<DbLockJanitorOptions>> | false;
  /** Listener called synchronously for every lock event (default none). */
  readonly onEvent: LockEventListener | undefined;
  /** At shutdown, how long running holders may finish before their locks are released, in ms (default 10000). */
  readonly shutdownTimeoutMs: number;
  /** What happens to a write on another connection during a fenced call (default 'warn'). */
  readonly escapedWrites: EscapedWritesMode;
  /** The @nestjs-cls/transactional TransactionHost a fenced call becomes the transaction of (default 'auto'). */
  readonly transactionHost: TransactionHostOption;
}

/** The one place defaults live. Documented in README's options table. */
export const DB_LOCK_DEFAULTS = Object.freeze({
  /** Key prefix joined with ':' (default ''). */
  namespace: '',
  /** How locks are held unless a call says otherwise (default 'lease'). */
  strategy: 'lease',
  /** Lease of a granted lock, in ms (default 30000). */
  leaseMs: 30_000,
  /** Default wait budget, in ms; 0 one try, Infinity forever (default 10000). */
  timeoutMs: 10_000,
  /** Default most tries within timeoutMs; Infinity: no limit (default Infinity). */
  maxAttempts: Infinity,
  /** First pause between two tries of a waiting caller, in ms (default 10). */
  retryMinDelayMs: 10,
  /** Longest pause between two tries of a waiting caller, in ms (default 200). */
  retryMaxDelayMs: 200,
  /** Waiting, holding or releasing longer than this logs a warning, in ms (default 3000). */
  slowThresholdMs: 3_000,
  /** How often held leases are renewed, in ms; undefined: a third of the shortest held lease. */
  renewIntervalMs: undefined,
  /** A hold longer than this is given up, in ms (default Infinity). */
  maxHoldMs: Infinity,
  /** Connections of the library's own pool (default 8). */
  poolSize: 8,
  /** While a writer waits, new readers of that key are held back (default true). */
  writerPreference: true,
  /** Row-lock callers of this process queued for a DataSource connection; undefined: no bound. */
  maxRowLockWaiters: undefined,
  /** Janitor settings, or false when this node never runs it. */
  janitor: Object.freeze({
    /** How often each node tries to run the janitor, in ms (30 s). */
    intervalMs: 30_000,
    /** Ended log rows older than this are deleted, in ms (7 days). */
    logRetentionMs: 7 * 24 * 3600_000,
    /** Rows per clean-up statement. */
    batchSize: 1000,
    /** Key rows not granted for this long are deleted, in ms (1 h). */
    idleKeyMs: 3600_000,
  }),
  /** Listener called synchronously for every lock event (default none). */
  onEvent: undefined,
  /** At shutdown, how long running holders may finish before their locks are released, in ms (default 10000). */
  shutdownTimeoutMs: 10_000,
  /** What happens to a write on another connection during a fenced call (default 'warn'). */
  escapedWrites: 'warn',
  /** The @nestjs-cls/transactional TransactionHost a fenced call becomes the transaction of (default 'auto'). */
  transactionHost: 'auto',
}) satisfies ResolvedDbLockOptions;
