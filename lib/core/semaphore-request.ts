import { DbLockOptionsError } from '../errors/db-lock-options.error.js';
import { InvalidLockKeyError } from '../errors/invalid-lock-key.error.js';
import { SemaphoreLimitError } from '../errors/semaphore-limit.error.js';
import type { HeldLock } from './held-lock.js';
import type { LockHandle } from './lock-handle.js';
import { type LockKeys, type LockTarget, resolveTargets } from './lock-key.js';
import type { LockMode } from './lock-mode.js';
import type { LockOptions } from './lock-request.js';
import type { RunLockedOptions } from './locked-call.options.js';
import { describe } from './option-checks.js';

/**
 * Largest semaphore limit: every grant counts the key's live permits under its row lock, so the
 * cost of a grant grows with the limit; past this, a counter of its own would serve better.
 */
export const MAX_SEMAPHORE_LIMIT = 1000;

/** Options of `withSemaphore()` / `acquireSemaphore()`: those of a lock, without `mode` (a permit is a permit). */
export type SemaphoreOptions = Omit<LockOptions, 'mode'>;

/** Options of `runSemaphore()` and `@Semaphore`: those of `runLocked()`, without `mode`. */
export type SemaphoreRunOptions = Omit<RunLockedOptions, 'mode'>;

/** The work `runSemaphore()` runs under a permit (the handle as `runLocked()` gives it). */
export type PermitWork<T> = (permit: LockHandle) => Promise<T> | T;

/** A permit of a semaphore: a lock handle of one key, with the semaphore's limit. */
export interface SemaphoreHandle extends LockHandle {
  /** At most this many holders of the key at once, across every process. */
  readonly limit: number;
}

/** Validates a semaphore limit before any SQL: an integer from 1 to MAX_SEMAPHORE_LIMIT. */
export function checkSemaphoreLimit(limit: unknown, where: string): number {
  if (typeof limit !== 'number' || !Number.isInteger(limit) || limit < 1 || limit > MAX_SEMAPHORE_LIMIT)
    throw new DbLockOptionsError([`limit must be an integer from 1 to ${MAX_SEMAPHORE_LIMIT}, got ${describe(limit)}`], where);
  return limit;
}

/**
 * What a semaphore call asks the call chain for: one key and its limit. Its target is taken in
 * 'read' mode as far as this process's bookkeeping goes (local permit holders do not block each
 * other; a local write lock of the key does), and the grant counts permits against the limit.
 */
export class SemaphoreKey {
  readonly limit: number;

  constructor(
    readonly key: unknown,
    limit: unknown,
    where: string,
  ) {
    this.limit = checkSemaphoreLimit(limit, where);
    if (typeof key !== 'string') throw new InvalidLockKeyError(key, `a semaphore takes one key (a string), got ${describe(key)}`);
  }

  /** The validated target (InvalidLockKeyError as for locks). */
  target(namespace: string): LockTarget {
    const [target] = resolveTargets(this.key, 'read', namespace);
    return Object.freeze({ ...target!, semaphoreLimit: this.limit });
  }
}

/** What the call chain takes: a lock's keys, or a semaphore's key. */
export type ChainKeys = LockKeys | SemaphoreKey;

/** The validated targets of a call, in the global lock order (InvalidLockKeyError before any SQL). */
export function targetsOf(keys: ChainKeys, mode: LockMode, namespace: string): readonly LockTarget[] {
  return keys instanceof SemaphoreKey ? [keys.target(namespace)] : resolveTargets(keys, mode, namespace);
}

/** The handle with its limit (a HeldLock or NestedLock, one per call). */
export function asSemaphoreHandle(handle: LockHandle, limit: number): SemaphoreHandle {
  Object.defineProperty(handle, 'limit', { value: limit, enumerable: true });
  return handle as SemaphoreHandle;
}

/**
 * A chain re-entering a key must ask for it as it holds it: a permit with the same limit, or a
 * lock (waiting on itself otherwise). Returns true so it can lead a condition.
 */
export function checkSameKind(target: LockTarget, holder: HeldLock): true {
  const held = holder.targets.find((t) => t.storedKey === target.storedKey)?.semaphoreLimit ?? null;
  const asked = target.semaphoreLimit ?? null;
  if (held !== asked) throw new SemaphoreLimitError(target.key, asked, held);
  return true;
}

/**
 * A semaphore call's lock options: those given, `mode` refused (a permit has no mode), always
 * the lease strategy (a row lock is exclusive or shared, never N at a time; see the README).
 */
export function semaphoreOptions(options: unknown, where: string): LockOptions {
  if (options === undefined || options === null) return { strategy: 'lease' };
  if (typeof options !== 'object' || Array.isArray(options))
    throw new DbLockOptionsError([`options must be an object, got ${describe(options)}`], where);
  const problems: string[] = [];
  if ('mode' in options) problems.push(`unknown option 'mode': a permit has no mode`);
  const strategy = (options as { strategy?: unknown }).strategy;
  if (strategy !== undefined && strategy !== 'lease') problems.push(`strategy must be 'lease' for a semaphore, got ${describe(strategy)}`);
  if (problems.length > 0) throw new DbLockOptionsError(problems, where);
  return { ...(options as LockOptions), strategy: 'lease' };
}
