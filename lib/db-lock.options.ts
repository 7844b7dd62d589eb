import type { LockEventListener } from './core/lock-events.js';
import { MIN_LEASE_MS } from './core/lock-request.js';
import { LOCK_STRATEGY_NAMES, type LockStrategyName } from './core/lock-strategy-name.js';
import { checkAttempts, checkDuration, describe } from './core/option-checks.js';
import { DbLockOptionsError } from './errors/db-lock-options.error.js';
import { ESCAPED_WRITES_MODES, type EscapedWritesMode } from './integrations/escaped-writes.mode.js';
import { checkTransactionHostOption, type TransactionHostOption } from './integrations/transaction-host.js';

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
  /** How often held leases are renewed, in ms. Default: a third of the shortest held lease. */
  renewIntervalMs?: number;
  /** A hold longer than this is given up (its signal aborts) even if the process is alive, in ms. Default Infinity. */
  maxHoldMs?: number;
  /**
   * Connections in the library's own small pool (lock statements and renewals never queue
   * behind business queries on the DataSource's pool). Default 4.
   */
  poolSize?: number;
  /**
   * While a writer waits, new readers are held back so writers are not starved. `false` lets
   * readers barge in as long as any reader holds the key. Default true.
   */
  writerPreference?: boolean;
  /**
   * Most row-lock acquisitions of this process that may wait in the database at once (each waits
   * on a connection of the app's DataSource). One more fails fast with TooManyLockWaitersError
   * instead of draining the pool. Default: half the DataSource's pool (at least 1).
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
   *   of hanging for innodb_lock_wait_timeout (50 s) on its own transaction's locks;
   * - 'error': refuse it with EscapedWriteError before it is sent;
   * - 'ignore': no check at all (writes outside the fence are intended; a self-deadlock waits the full innodb_lock_wait_timeout).
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
  /** Connections of the library's own pool (default 4). */
  readonly poolSize: number;
  /** While a writer waits, new readers of that key are held back (default true). */
  readonly writerPreference: boolean;
  /** undefined: derived from the DataSource's pool at bootstrap. */
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
  /** Connections of the library's own pool (default 4). */
  poolSize: 4,
  /** While a writer waits, new readers of that key are held back (default true). */
  writerPreference: true,
  /** Row-lock waiters bound; undefined: half the DataSource's pool, found at bootstrap. */
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

const MAX_NAMESPACE_LENGTH = 64;

const KNOWN_KEYS = new Set<string>(Object.keys(DB_LOCK_DEFAULTS));

/**
 * Merges `options` over the defaults and validates the result. Throws one DbLockOptionsError
 * that lists every problem. Used by forRoot, forRootAsync and per-call options alike.
 */
export function resolveOptions(options: unknown): ResolvedDbLockOptions {
  const problems: string[] = [];
  if (options === undefined || options === null) options = {};
  if (typeof options !== 'object' || Array.isArray(options)) {
    throw new DbLockOptionsError([`options must be an object, got ${describe(options)}`]);
  }
  const input = coerceConfigValues(options as Record<string, unknown>);
  for (const key of Object.keys(input)) {
    if (!KNOWN_KEYS.has(key)) problems.push(`unknown option '${key}'`);
  }
  const pick = <K extends keyof typeof DB_LOCK_DEFAULTS>(key: K): unknown =>
    input[key] === undefined ? DB_LOCK_DEFAULTS[key] : input[key];

  const namespace = pick('namespace');
  if (typeof namespace !== 'string') problems.push(`namespace must be a string, got ${describe(namespace)}`);
  else if (namespace.length > MAX_NAMESPACE_LENGTH || !namespace.isWellFormed())
    problems.push(`namespace must be well-formed text of at most ${MAX_NAMESPACE_LENGTH} characters`);

  const strategy = pick('strategy');
  if (!LOCK_STRATEGY_NAMES.includes(strategy as LockStrategyName))
    problems.push(`strategy must be 'lease' or 'row-lock', got ${describe(strategy)}`);
  const leaseMs = checkDuration(problems, 'leaseMs', pick('leaseMs'), { min: MIN_LEASE_MS });
  const timeoutMs = checkDuration(problems, 'timeoutMs', pick('timeoutMs'), { min: 0, infinite: true });
  const maxAttempts = checkAttempts(problems, 'maxAttempts', pick('maxAttempts'));
  const retryMinDelayMs = checkDuration(problems, 'retryMinDelayMs', pick('retryMinDelayMs'), { min: 1 });
  const retryMaxDelayMs = checkDuration(problems, 'retryMaxDelayMs', pick('retryMaxDelayMs'), { min: 1 });
  if (retryMinDelayMs !== undefined && retryMaxDelayMs !== undefined && retryMinDelayMs > retryMaxDelayMs)
    problems.push(`retryMinDelayMs (${retryMinDelayMs}) must not exceed retryMaxDelayMs (${retryMaxDelayMs})`);
  const slowThresholdMs = checkDuration(problems, 'slowThresholdMs', pick('slowThresholdMs'), { min: 1, infinite: true });
  const renewRaw = pick('renewIntervalMs');
  const renewIntervalMs =
    renewRaw === undefined ? undefined : checkDuration(problems, 'renewIntervalMs', renewRaw, { min: 10 });
  if (renewIntervalMs !== undefined && leaseMs !== undefined && renewIntervalMs >= leaseMs)
    problems.push(`renewIntervalMs (${renewIntervalMs}) must be shorter than leaseMs (${leaseMs})`);
  const maxHoldMs = checkDuration(problems, 'maxHoldMs', pick('maxHoldMs'), { min: 1, infinite: true });

  const poolSize = pick('poolSize');
  if (typeof poolSize !== 'number' || !Number.isInteger(poolSize) || poolSize < 2 || poolSize > 100)
    problems.push(`poolSize must be an integer from 2 to 100, got ${describe(poolSize)}`);

  const writerPreference = pick('writerPreference');
  if (typeof writerPreference !== 'boolean')
    problems.push(`writerPreference must be a boolean, got ${describe(writerPreference)}`);

  const waitersRaw = pick('maxRowLockWaiters');
  const maxRowLockWaiters = waitersRaw === undefined ? undefined : checkAttempts(problems, 'maxRowLockWaiters', waitersRaw);

  const janitor = resolveJanitor(problems, input.janitor);

  const onEvent = pick('onEvent');
  if (onEvent !== undefined && typeof onEvent !== 'function')
    problems.push(`onEvent must be a function, got ${describe(onEvent)}`);

  const shutdownTimeoutMs = checkDuration(problems, 'shutdownTimeoutMs', pick('shutdownTimeoutMs'), { min: 0 });

  const escapedWrites = pick('escapedWrites');
  if (!ESCAPED_WRITES_MODES.includes(escapedWrites as EscapedWritesMode))
    problems.push(`escapedWrites must be 'warn', 'error' or 'ignore', got ${describe(escapedWrites)}`);
  const transactionHost = pick('transactionHost');
  checkTransactionHostOption(problems, transactionHost);

  if (problems.length > 0) throw new DbLockOptionsError(problems);
  return Object.freeze({
    namespace: namespace as string,
    strategy: strategy as LockStrategyName,
    leaseMs: leaseMs!,
    timeoutMs: timeoutMs!,
    maxAttempts: maxAttempts!,
    retryMinDelayMs: retryMinDelayMs!,
    retryMaxDelayMs: retryMaxDelayMs!,
    slowThresholdMs: slowThresholdMs!,
    renewIntervalMs,
    maxHoldMs: maxHoldMs!,
    poolSize: poolSize as number,
    writerPreference: writerPreference as boolean,
    maxRowLockWaiters,
    janitor,
    onEvent: onEvent as LockEventListener | undefined,
    shutdownTimeoutMs: shutdownTimeoutMs!,
    escapedWrites: escapedWrites as EscapedWritesMode,
    transactionHost: transactionHost as TransactionHostOption,
  });
}

function resolveJanitor(problems: string[], raw: unknown): ResolvedDbLockOptions['janitor'] {
  if (raw === false) return false;
  if (raw === undefined) return DB_LOCK_DEFAULTS.janitor;
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    problems.push(`janitor must be an object or false, got ${describe(raw)}`);
    return false;
  }
  const input = raw as Record<string, unknown>;
  const defaults = DB_LOCK_DEFAULTS.janitor;
  for (const key of Object.keys(input)) {
    if (!(key in defaults)) problems.push(`unknown option 'janitor.${key}'`);
  }
  const intervalMs = checkDuration(problems, 'janitor.intervalMs', input.intervalMs ?? defaults.intervalMs, { min: 100 });
  const logRetentionMs = checkDuration(problems, 'janitor.logRetentionMs', input.logRetentionMs ?? defaults.logRetentionMs, {
    min: 0,
    infinite: true,
    noTimer: true,
  });
  const batchSize = input.batchSize ?? defaults.batchSize;
  if (typeof batchSize !== 'number' || !Number.isInteger(batchSize) || batchSize < 1 || batchSize > 100_000)
    problems.push(`janitor.batchSize must be an integer from 1 to 100000, got ${describe(batchSize)}`);
  const idleKeyMs = checkDuration(problems, 'janitor.idleKeyMs', input.idleKeyMs ?? defaults.idleKeyMs, { min: 0, infinite: true, noTimer: true });
  return Object.freeze({ intervalMs: intervalMs!, logRetentionMs: logRetentionMs!, batchSize: batchSize as number, idleKeyMs: idleKeyMs! });
}

/**
 * Module options often come from configuration (`ConfigService.get('LOCK_LEASE_MS')` returns the
 * string '5000'). Decimal integer strings, 'Infinity' and 'true'/'false' are taken for the numbers
 * and booleans they spell, at the top level and in `janitor`; anything else is validated as given.
 */
function coerceConfigValues(input: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(input)) {
    if (key === 'janitor' && typeof value === 'object' && value !== null && !Array.isArray(value)) out[key] = coerceConfigValues(value as Record<string, unknown>);
    else if (TEXT_OPTIONS.has(key)) out[key] = value;
    else out[key] = coerceScalar(value);
  }
  return out;
}

/** Options whose values are text (or functions): never read as numbers or booleans. */
const TEXT_OPTIONS = new Set(['namespace', 'strategy', 'onEvent', 'escapedWrites']);

function coerceScalar(value: unknown): unknown {
  if (typeof value !== 'string') return value;
  const text = value.trim();
  if (/^-?\d+$/.test(text)) return Number(text);
  if (text === 'Infinity') return Infinity;
  if (text === 'true') return true;
  if (text === 'false') return false;
  return value;
}
