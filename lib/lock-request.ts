import { checkDuration, describe, MIN_LEASE_MS, type ResolvedDbLockOptions } from './db-lock.options.js';
import { DbLockOptionsError } from './errors/db-lock-options.error.js';
import { LOCK_MODES, type LockMode } from './lock-mode.js';

/** Options of one `acquire()` / `tryAcquire()` / `withLock()` call. */
export interface LockOptions {
  /** 'read' or 'write'. Default 'write'. Applies to keys given without their own mode. */
  mode?: LockMode;
  /** Wait budget in ms; 0 = one try, Infinity = wait forever. Default: the module's timeoutMs (10000). */
  timeoutMs?: number;
  /** Lease in ms. Default: the module's leaseMs (30000). */
  leaseMs?: number;
}

export interface ResolvedLockOptions {
  readonly mode: LockMode;
  readonly timeoutMs: number;
  readonly leaseMs: number;
}

const KNOWN = new Set(['mode', 'timeoutMs', 'leaseMs']);

/**
 * Validates one call's options against the module defaults. Throws before any SQL.
 * `oneTry` (tryAcquire): `timeoutMs` is not an option there and is reported like an unknown one.
 */
export function resolveLockOptions(options: unknown, defaults: ResolvedDbLockOptions, oneTry = false): ResolvedLockOptions {
  if (options === undefined || options === null) options = {};
  if (typeof options !== 'object' || Array.isArray(options))
    throw new DbLockOptionsError([`lock options must be an object, got ${describe(options)}`], 'lock options');
  const input = options as Record<string, unknown>;
  const problems: string[] = [];
  for (const key of Object.keys(input)) if (!KNOWN.has(key)) problems.push(`unknown option '${key}'`);
  if (oneTry && 'timeoutMs' in input) problems.push(`unknown option 'timeoutMs': tryAcquire() never waits (use acquire() for a wait budget)`);
  const mode = input.mode ?? 'write';
  if (!LOCK_MODES.includes(mode as LockMode)) problems.push(`mode must be 'read' or 'write', got ${describe(mode)}`);
  const timeoutMs = oneTry ? 0 : checkDuration(problems, 'timeoutMs', input.timeoutMs ?? defaults.timeoutMs, { min: 0, infinite: true });
  const leaseMs = checkDuration(problems, 'leaseMs', input.leaseMs ?? defaults.leaseMs, { min: MIN_LEASE_MS });
  if (problems.length > 0) throw new DbLockOptionsError(problems, 'lock options');
  return { mode: mode as LockMode, timeoutMs: timeoutMs!, leaseMs: leaseMs! };
}

/** Validates the lease given to `extend()`. */
export function checkLease(leaseMs: unknown): number | undefined {
  if (leaseMs === undefined) return undefined;
  const problems: string[] = [];
  const value = checkDuration(problems, 'leaseMs', leaseMs, { min: MIN_LEASE_MS });
  if (problems.length > 0) throw new DbLockOptionsError(problems, 'extend() arguments');
  return value;
}
