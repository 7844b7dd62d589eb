import { checkSemaphoreLimit, type SemaphoreRunOptions } from '../core/semaphore-request.js';
import { DbLockOptionsError } from '../errors/db-lock-options.error.js';
import { describe } from '../core/option-checks.js';
import { createLockDecorator, type LockMethodDecorator, type SkippingLockMethodDecorator } from './lock-decorator.js';

/** A semaphore's key: a template such as 'export:{0}', or a function of the arguments returning the key. */
export type SemaphoreKeySource<A extends unknown[] = any[]> = string | ((...args: A) => string);

/** Options of `@Semaphore(key, limit, options)`: those of `runSemaphore()`, plus the DataSource. */
export interface SemaphoreDecoratorOptions extends SemaphoreRunOptions {
  /** DataSource whose DbLockModule serves this semaphore (as for `@DistributedLock`). */
  dataSourceName?: string;
}

/**
 * Runs the method under one of `limit` permits of the semaphore `key`: at most `limit` calls at
 * once across every process. Built as `@DistributedLock` is (wrapped where declared, other
 * decorators' metadata kept, key from the arguments), it forwards to `LockService.runSemaphore`:
 * by default a fenced REQUIRES_NEW transaction (`lockService.manager`) that commits only while the
 * permit is still this holder's, as `@WriteLock` does.
 *
 *   @Semaphore('export:{0}', 3)
 *   @Semaphore((tenant: string) => `sync:${tenant}`, 2, { onLocked: 'skip' })
 */
export function Semaphore<A extends unknown[] = any[]>(
  key: SemaphoreKeySource<A> | undefined,
  limit: number,
  options: SemaphoreDecoratorOptions & { onLocked: 'skip' },
): SkippingLockMethodDecorator<A>;
export function Semaphore<A extends unknown[] = any[]>(
  key: SemaphoreKeySource<A> | undefined,
  limit: number,
  options?: SemaphoreDecoratorOptions & { onLocked?: 'throw' },
): LockMethodDecorator<A>;
export function Semaphore<A extends unknown[] = any[]>(
  key: SemaphoreKeySource<A> | undefined,
  limit: number,
  options: SemaphoreDecoratorOptions,
): SkippingLockMethodDecorator<A>;
export function Semaphore(key: unknown, limit: number, options?: SemaphoreDecoratorOptions): unknown {
  // Checked when the class loads, as every lock decorator's declaration is.
  checkSemaphoreLimit(limit, '@Semaphore arguments');
  if (Array.isArray(key))
    throw new DbLockOptionsError(['a semaphore takes one key: a string template or a function returning one'], '@Semaphore arguments');
  if (options !== undefined && (typeof options !== 'object' || options === null || Array.isArray(options)))
    throw new DbLockOptionsError([`options must be an object, got ${describe(options)}`], '@Semaphore arguments');
  const problems: string[] = [];
  if (options && 'mode' in options) problems.push(`unknown option 'mode': a permit has no mode`);
  // The key is the first argument; createLockDecorator takes it (and dataSourceName) from the options only for its own use.
  if (options && 'key' in options) problems.push(`unknown option 'key': the key is @Semaphore's first argument`);
  if (options?.strategy !== undefined && options.strategy !== 'lease')
    problems.push(`strategy must be 'lease' for a semaphore, got ${describe(options.strategy)}`);
  if (problems.length > 0) throw new DbLockOptionsError(problems, '@Semaphore options');
  return createLockDecorator('Semaphore', key, { ...options }, limit);
}
