import type { CallChain } from './call-chain.js';
import type { LockHandle } from './lock-handle.js';
import { resolveRunLockedOptions } from './locked-call.options.js';
import {
  asSemaphoreHandle,
  type SemaphoreHandle,
  SemaphoreKey,
  type SemaphoreOptions,
  type SemaphoreRunOptions,
  semaphoreOptions,
} from './semaphore-request.js';

/**
 * The semaphore calls of LockService over the call chain: each checks its arguments (limit, key,
 * options) before any SQL and hands one permit request to the chain, where it waits, re-enters and
 * is fenced as a lock is.
 */
export class SemaphoreCalls {
  constructor(private readonly chain: CallChain) {}

  async acquire(key: string, limit: number, options: SemaphoreOptions | undefined): Promise<SemaphoreHandle> {
    const semaphore = new SemaphoreKey(key, limit, 'acquireSemaphore() arguments');
    const handle = await this.chain.acquire(semaphore, semaphoreOptions(options, 'semaphore options'));
    return asSemaphoreHandle(handle, semaphore.limit);
  }

  with<T>(key: string, limit: number, fn: (permit: SemaphoreHandle) => Promise<T> | T, options: SemaphoreOptions | undefined): Promise<T> {
    const semaphore = new SemaphoreKey(key, limit, 'withSemaphore() arguments');
    const lockOptions = semaphoreOptions(options, 'semaphore options');
    // A missing callback is refused by withLock, before any SQL.
    const run = typeof fn === 'function' ? (handle: LockHandle) => fn(asSemaphoreHandle(handle, semaphore.limit)) : fn;
    return this.chain.withLock(semaphore, run, lockOptions);
  }

  run<T>(key: string, limit: number, fn: (permit: LockHandle) => Promise<T> | T, options: SemaphoreRunOptions | undefined): Promise<T | undefined> {
    const semaphore = new SemaphoreKey(key, limit, 'runSemaphore() arguments');
    return this.chain.runLocked(semaphore, fn, resolveRunLockedOptions(semaphoreOptions(options, 'semaphore options')));
  }
}
