import { DbLockOptionsError } from '../errors/db-lock-options.error.js';
import type { LockMode } from '../core/lock-mode.js';
import {
  createLockDecorator,
  type DistributedLockOptions,
  type LockMethodDecorator,
  positionalOptions,
  type SkippingLockMethodDecorator,
} from './lock-decorator.js';
import type { LockKeySource } from './lock-key-template.js';

/** Options of `@ReadLock(key, options)` / `@WriteLock(key, options)`. */
export type ReadWriteLockOptions = Omit<DistributedLockOptions, 'key' | 'mode'>;

/**
 * Runs the method under a distributed lock (default: write mode, in a fenced REQUIRES_NEW
 * transaction; see `LockService.runLocked`).
 *
 *   @DistributedLock('loan:{0}', 'write', 5000)
 *   @DistributedLock({ key: (o: Order) => `order:${o.id}`, mode: 'read', onLocked: 'skip' })
 *   @DistributedLock()   // key 'ClassName.methodName'
 */
export function DistributedLock<A extends unknown[] = any[]>(
  options: DistributedLockOptions<A> & { onLocked: 'skip' },
): SkippingLockMethodDecorator<A>;
export function DistributedLock<A extends unknown[] = any[]>(options: DistributedLockOptions<A> & { onLocked?: 'throw' }): LockMethodDecorator<A>;
export function DistributedLock<A extends unknown[] = any[]>(options: DistributedLockOptions<A>): SkippingLockMethodDecorator<A>;
export function DistributedLock<A extends unknown[] = any[]>(key?: LockKeySource<A>, mode?: LockMode, timeoutMs?: number): LockMethodDecorator<A>;
export function DistributedLock(keyOrOptions?: unknown, mode?: LockMode, timeoutMs?: number): unknown {
  if (isOptionsObject(keyOrOptions)) {
    if (mode !== undefined || timeoutMs !== undefined)
      throw new DbLockOptionsError(['pass mode and timeoutMs inside the options object, not after it'], '@DistributedLock arguments');
    const { key, ...options } = keyOrOptions;
    return createLockDecorator('DistributedLock', key, options);
  }
  return createLockDecorator('DistributedLock', keyOrOptions, positionalOptions(mode, timeoutMs));
}

/** `@DistributedLock` in read mode: any number of readers, no writer. */
export function ReadLock<A extends unknown[] = any[]>(
  key: LockKeySource<A> | undefined,
  options: ReadWriteLockOptions & { onLocked: 'skip' },
): SkippingLockMethodDecorator<A>;
export function ReadLock<A extends unknown[] = any[]>(
  key?: LockKeySource<A>,
  options?: ReadWriteLockOptions & { onLocked?: 'throw' },
): LockMethodDecorator<A>;
export function ReadLock<A extends unknown[] = any[]>(
  key: LockKeySource<A> | undefined,
  options: ReadWriteLockOptions,
): SkippingLockMethodDecorator<A>;
export function ReadLock(key?: unknown, options?: ReadWriteLockOptions): unknown {
  return createLockDecorator('ReadLock', key, modeOptions('ReadLock', 'read', options));
}

/** `@DistributedLock` in write mode: one holder at a time. */
export function WriteLock<A extends unknown[] = any[]>(
  key: LockKeySource<A> | undefined,
  options: ReadWriteLockOptions & { onLocked: 'skip' },
): SkippingLockMethodDecorator<A>;
export function WriteLock<A extends unknown[] = any[]>(
  key?: LockKeySource<A>,
  options?: ReadWriteLockOptions & { onLocked?: 'throw' },
): LockMethodDecorator<A>;
export function WriteLock<A extends unknown[] = any[]>(
  key: LockKeySource<A> | undefined,
  options: ReadWriteLockOptions,
): SkippingLockMethodDecorator<A>;
export function WriteLock(key?: unknown, options?: ReadWriteLockOptions): unknown {
  return createLockDecorator('WriteLock', key, modeOptions('WriteLock', 'write', options));
}

function isOptionsObject(value: unknown): value is Record<string, unknown> & { key?: unknown } {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function modeOptions(decorator: string, mode: LockMode, options: unknown): Record<string, unknown> {
  if (options === undefined) return { mode };
  if (!isOptionsObject(options)) throw new DbLockOptionsError([`options must be an object, got ${typeof options}`], `@${decorator} arguments`);
  const problems: string[] = [];
  if ('key' in options) problems.push(`key goes first: @${decorator}(key, options)`);
  if ('mode' in options) problems.push(`@${decorator} sets mode '${mode}'; use @DistributedLock for another`);
  if (problems.length > 0) throw new DbLockOptionsError(problems, `@${decorator} options`);
  return { ...options, mode };
}
