import { DbLockOptionsError } from '../errors/db-lock-options.error.js';
import { checkLockOptions, LOCK_OPTION_NAMES, type LockOptions } from './lock-request.js';
import { describe, resolvedOnceIfFrozen } from './option-checks.js';

/**
 * - 'requires-new': the method runs in a NEW transaction, fenced: it commits only if the lock is
 *   still this holder's, and the lock ends in that same commit. Reach its EntityManager through
 *   `lockService.manager`. (Lease: a transaction on the app's DataSource opened after the grant;
 *   row-lock: the lock's own transaction.)
 * - 'none': the lock only, for work whose effects are outside the database. (Row-lock: the lock
 *   is a transaction whatever this says; the work runs in it.)
 */
export type LockTransactionMode = 'requires-new' | 'none';
export const LOCK_TRANSACTION_MODES: readonly LockTransactionMode[] = Object.freeze(['requires-new', 'none']);

/**
 * - 'throw': LockTimeoutError when the lock cannot be had within `timeoutMs`.
 * - 'skip': the work is not run and the call resolves `undefined` (cluster-singleton jobs).
 */
export type OnLockedPolicy = 'throw' | 'skip';
export const ON_LOCKED_POLICIES: readonly OnLockedPolicy[] = Object.freeze(['throw', 'skip']);

/** Isolation of the fenced transaction. */
export type LockIsolationLevel = 'READ UNCOMMITTED' | 'READ COMMITTED' | 'REPEATABLE READ' | 'SERIALIZABLE';
export const LOCK_ISOLATION_LEVELS: readonly LockIsolationLevel[] = Object.freeze([
  'READ UNCOMMITTED',
  'READ COMMITTED',
  'REPEATABLE READ',
  'SERIALIZABLE',
]);

/** Options of `LockService.runLocked()` (and of the lock decorators, which forward to it). */
export interface RunLockedOptions extends LockOptions {
  /** Default 'requires-new'. */
  transaction?: LockTransactionMode;
  /** Default 'throw'. With 'skip', `timeoutMs` defaults to 0 (one try). */
  onLocked?: OnLockedPolicy;
  /**
   * Isolation of the 'requires-new' transaction. Row-lock: default the server's own (REPEATABLE
   * READ on MySQL and MariaDB; no statement sent to set it): the lock is its transaction's first
   * statement, so the work reads after the previous holder's commit. Lease: default 'READ COMMITTED': the watchdog's
   * renewals write the very log row the fence writes before COMMIT; at REPEATABLE READ, with
   * MariaDB >= 11.6.2's `innodb_snapshot_isolation` (on by default there), that write fails with
   * error 1020 whenever a renewal landed after the transaction's first read, and a valid holder
   * would look lost. READ COMMITTED takes a fresh view per statement, so the fence always sees
   * the row's latest committed version.
   */
  isolationLevel?: LockIsolationLevel;
}

export const DEFAULT_TRANSACTION_MODE: LockTransactionMode = 'requires-new';
export const DEFAULT_ON_LOCKED: OnLockedPolicy = 'throw';
export const DEFAULT_ISOLATION_LEVEL: LockIsolationLevel = 'READ COMMITTED';

export interface ResolvedRunLockedOptions {
  /** What `acquire()` gets (module defaults are applied there). */
  readonly lock: LockOptions;
  readonly transaction: LockTransactionMode;
  readonly onLocked: OnLockedPolicy;
  /** The caller's own; undefined: the transaction's default (lease DEFAULT_ISOLATION_LEVEL, row-lock the server's). */
  readonly isolationLevel: LockIsolationLevel | undefined;
}

const KNOWN = new Set([...LOCK_OPTION_NAMES, 'transaction', 'onLocked', 'isolationLevel']);

/**
 * Checks the options a locked call may carry, without module defaults (so decorators can run it
 * when the class loads). Pushes one line per problem.
 */
export function checkRunLockedOptions(problems: string[], input: Record<string, unknown>, extraKnown: readonly string[] = []): void {
  for (const key of Object.keys(input)) if (!KNOWN.has(key) && !extraKnown.includes(key)) problems.push(`unknown option '${key}'`);
  checkLockOptions(problems, input);
  if (input.transaction !== undefined && !LOCK_TRANSACTION_MODES.includes(input.transaction as LockTransactionMode))
    problems.push(`transaction must be 'requires-new' or 'none', got ${describe(input.transaction)}`);
  if (input.onLocked !== undefined && !ON_LOCKED_POLICIES.includes(input.onLocked as OnLockedPolicy))
    problems.push(`onLocked must be 'throw' or 'skip', got ${describe(input.onLocked)}`);
  if (input.isolationLevel !== undefined && !LOCK_ISOLATION_LEVELS.includes(input.isolationLevel as LockIsolationLevel))
    problems.push(`isolationLevel must be one of ${LOCK_ISOLATION_LEVELS.map((l) => `'${l}'`).join(', ')}, got ${describe(input.isolationLevel)}`);
  if (input.isolationLevel !== undefined && input.transaction === 'none') problems.push(`isolationLevel only applies to transaction 'requires-new'`);
}

/** A decorator's options, frozen when its class loaded, resolved once. */
const resolvedFrozen = new WeakMap<object, ResolvedRunLockedOptions>();

/** Validates one `runLocked()` call's options and applies this layer's defaults. Throws before any SQL. */
export function resolveRunLockedOptions(options: unknown): ResolvedRunLockedOptions {
  return resolvedOnceIfFrozen(resolvedFrozen, options, () => resolveOnce(options));
}

function resolveOnce(options: unknown): ResolvedRunLockedOptions {
  if (options === undefined || options === null) options = {};
  if (typeof options !== 'object' || Array.isArray(options))
    throw new DbLockOptionsError([`options must be an object, got ${describe(options)}`], 'runLocked() options');
  const input = options as Record<string, unknown>;
  const problems: string[] = [];
  checkRunLockedOptions(problems, input);
  if (problems.length > 0) throw new DbLockOptionsError(problems, 'runLocked() options');
  const onLocked = (input.onLocked as OnLockedPolicy | undefined) ?? DEFAULT_ON_LOCKED;
  const lock: LockOptions = {};
  for (const name of ['mode', 'leaseMs', 'strategy', 'maxAttempts', 'name'] as const)
    if (input[name] !== undefined) (lock as Record<string, unknown>)[name] = input[name];
  // A skipping caller (cluster-singleton job) wants one try unless it says otherwise.
  if (input.timeoutMs !== undefined) lock.timeoutMs = input.timeoutMs as number;
  else if (onLocked === 'skip') lock.timeoutMs = 0;
  return Object.freeze({
    lock: Object.freeze(lock),
    transaction: (input.transaction as LockTransactionMode | undefined) ?? DEFAULT_TRANSACTION_MODE,
    onLocked,
    isolationLevel: input.isolationLevel as LockIsolationLevel | undefined,
  });
}
