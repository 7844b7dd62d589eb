import { codePoints } from './lock-key.js';
import type { ResolvedDbLockOptions } from '../db-lock.options.js';
import { DbLockOptionsError } from '../errors/db-lock-options.error.js';
import { LOCK_MODES, type LockMode } from './lock-mode.js';
import { LOCK_STRATEGY_CHOICES, LOCK_STRATEGY_NAMES, type LockStrategyName } from '../strategies/lock-strategy-name.js';
import { checkAttempts, checkDuration, describe, resolvedOnceIfFrozen } from './option-checks.js';

/** Smallest lease accepted: renewals run every lease/3, so less is all overhead. */
export const MIN_LEASE_MS = 100;

/** Options of one `acquire()` / `tryAcquire()` / `withLock()` call. */
export interface LockOptions {
  /** 'read' or 'write'. Default 'write'. Applies to keys given without their own mode. */
  mode?: LockMode;
  /**
   * Wait budget in ms, for the lock and for the DataSource connection a locked call's transaction
   * needs; 0 = one try, Infinity = wait forever. Default: the module's timeoutMs (10000).
   */
  timeoutMs?: number;
  /** Lease in ms. Default: the module's leaseMs (30000). */
  leaseMs?: number;
  /** How the lock is held: 'lease' or 'row-lock'. Default: the module's strategy ('lease'). */
  strategy?: LockStrategyName;
  /**
   * Most tries before giving up with LockTimeoutError, within `timeoutMs` ("retry N times"):
   * 1 = one try. A try answered from this process's own knowledge (a local holder conflicts)
   * counts as one. Default: the module's maxAttempts (Infinity: only `timeoutMs` bounds the wait).
   */
  maxAttempts?: number;
  /**
   * What metrics call this lock (`lock.name`): a low-cardinality label such as `'loan'` or
   * `'loan:{id}'`, never a key filled in per call. At most 255 characters. Default: `'unnamed'`
   * (the lock decorators default to their key template, or `'ClassName.methodName'`).
   */
  name?: string;
}

/** `lock.name` of a lock taken without a `name`. */
export const UNNAMED_LOCK = 'unnamed';
/** Longest accepted lock `name`. */
export const MAX_LOCK_NAME_LENGTH = 255;

export interface ResolvedLockOptions {
  readonly mode: LockMode;
  readonly timeoutMs: number;
  readonly leaseMs: number;
  readonly strategy: LockStrategyName;
  readonly maxAttempts: number;
  readonly name: string;
}

export const LOCK_OPTION_NAMES: readonly string[] = Object.freeze(['mode', 'timeoutMs', 'leaseMs', 'strategy', 'maxAttempts', 'name']);

/**
 * Checks per-call lock options without applying module defaults (decorators run it when the
 * class loads). Pushes one line per problem.
 */
export function checkLockOptions(problems: string[], input: Record<string, unknown>): void {
  if (input.mode !== undefined && !LOCK_MODES.includes(input.mode as LockMode))
    problems.push(`mode must be 'read' or 'write', got ${describe(input.mode)}`);
  if (input.timeoutMs !== undefined) checkDuration(problems, 'timeoutMs', input.timeoutMs, { min: 0, infinite: true });
  if (input.leaseMs !== undefined) checkDuration(problems, 'leaseMs', input.leaseMs, { min: MIN_LEASE_MS });
  if (input.strategy !== undefined && !LOCK_STRATEGY_NAMES.includes(input.strategy as LockStrategyName))
    problems.push(`strategy must be ${LOCK_STRATEGY_CHOICES}, got ${describe(input.strategy)}`);
  if (input.maxAttempts !== undefined) checkAttempts(problems, 'maxAttempts', input.maxAttempts);
  if (input.name !== undefined && (typeof input.name !== 'string' || input.name.length === 0 || codePoints(input.name) > MAX_LOCK_NAME_LENGTH))
    problems.push(`name must be a non-empty string of at most ${MAX_LOCK_NAME_LENGTH} characters, got ${describe(input.name)}`);
}

/**
 * Validates one call's options against the module defaults. Throws before any SQL.
 * `oneTry` (tryAcquire): `timeoutMs` and `maxAttempts` are not options there and are reported like unknown ones.
 */
export function resolveLockOptions(options: unknown, defaults: ResolvedDbLockOptions, oneTry = false): ResolvedLockOptions {
  if (oneTry) return resolveOnce(options, defaults, true);
  let cache = resolvedByDefaults.get(defaults);
  if (!cache) resolvedByDefaults.set(defaults, (cache = new WeakMap()));
  // No options at all (most calls): the defaults themselves, resolved once.
  if (options === undefined || options === null) return resolvedOnceIfFrozen(cache, defaults, () => Object.freeze(resolveOnce({}, defaults, false)));
  return resolvedOnceIfFrozen(cache, options, () => Object.freeze(resolveOnce(options, defaults, false)));
}

/** Per module's defaults: frozen options resolved once (runLocked passes a decorator's on frozen), keyed by the defaults when none were given. */
const resolvedByDefaults = new WeakMap<object, WeakMap<object, ResolvedLockOptions>>();

function resolveOnce(options: unknown, defaults: ResolvedDbLockOptions, oneTry: boolean): ResolvedLockOptions {
  if (options === undefined || options === null) options = {};
  if (typeof options !== 'object' || Array.isArray(options))
    throw new DbLockOptionsError([`lock options must be an object, got ${describe(options)}`], 'lock options');
  const input = options as Record<string, unknown>;
  const problems: string[] = [];
  for (const key of Object.keys(input)) if (!LOCK_OPTION_NAMES.includes(key)) problems.push(`unknown option '${key}'`);
  if (oneTry && 'timeoutMs' in input) problems.push(`unknown option 'timeoutMs': tryAcquire() never waits (use acquire() for a wait budget)`);
  if (oneTry && 'maxAttempts' in input) problems.push(`unknown option 'maxAttempts': tryAcquire() makes exactly one try`);
  checkLockOptions(problems, oneTry ? { ...input, timeoutMs: undefined, maxAttempts: undefined } : input);
  if (problems.length > 0) throw new DbLockOptionsError(problems, 'lock options');
  return {
    mode: (input.mode as LockMode | undefined) ?? 'write',
    timeoutMs: oneTry ? 0 : ((input.timeoutMs as number | undefined) ?? defaults.timeoutMs),
    leaseMs: (input.leaseMs as number | undefined) ?? defaults.leaseMs,
    strategy: (input.strategy as LockStrategyName | undefined) ?? defaults.strategy,
    maxAttempts: oneTry ? 1 : ((input.maxAttempts as number | undefined) ?? defaults.maxAttempts),
    name: (input.name as string | undefined) ?? UNNAMED_LOCK,
  };
}

/** Validates the lease given to `extend()`. */
export function checkLease(leaseMs: unknown): number | undefined {
  if (leaseMs === undefined) return undefined;
  const problems: string[] = [];
  const value = checkDuration(problems, 'leaseMs', leaseMs, { min: MIN_LEASE_MS });
  if (problems.length > 0) throw new DbLockOptionsError(problems, 'extend() arguments');
  return value;
}
