import 'reflect-metadata';
import { Injectable } from '@nestjs/common';
import { LockService, ReadLock, Semaphore, WriteLock } from '../../../lib/index.js';
import { insert } from './entries.js';

/**
 * The service of the joined-lock tests: outer fenced calls that take further locks inside their
 * open transaction (row-lock and lease helpers, a semaphore, a read then a write on one key).
 */
@Injectable()
export class JoinedLocks {
  constructor(readonly locks: LockService) {}

  @WriteLock('jr:{0}', { strategy: 'row-lock', timeoutMs: 300 })
  async innerRow(k: string): Promise<void> {
    await insert(this.locks.manager, k, 'inner-row');
  }

  @WriteLock('jr:{0}', { strategy: 'row-lock', onLocked: 'skip' })
  async innerRowSkip(k: string): Promise<'ran' | undefined> {
    await insert(this.locks.manager, k, 'inner-row-skip');
    return 'ran';
  }

  @WriteLock('jl:{0}', { strategy: 'lease' })
  async innerLease(k: string): Promise<void> {
    await insert(this.locks.manager, k, 'inner-lease');
  }

  /** Outer call; `inner` runs nested; its failure is caught and the outer goes on and commits. */
  @WriteLock('jo:{0}')
  async outerCatching(k: string, inner: () => Promise<unknown>): Promise<{ innerError: unknown; innerResult: unknown }> {
    await insert(this.locks.manager, k, 'outer-before');
    let innerError: unknown;
    let innerResult: unknown;
    try {
      innerResult = await inner();
    } catch (error) {
      innerError = error;
    }
    await insert(this.locks.manager, k, 'outer-after');
    return { innerError, innerResult };
  }

  @WriteLock('jc:{0}', { timeoutMs: 2_000 })
  async innerSameKey(k: string, who: string): Promise<void> {
    await insert(this.locks.manager, k, who);
  }

  /** Two concurrent nested calls on one key the chain does not hold yet (e.g. two order lines of one SKU). */
  @WriteLock('jo:{0}')
  async outerConcurrent(k: string): Promise<void> {
    await insert(this.locks.manager, k, 'outer');
    await Promise.all([this.innerSameKey(k, 'line-1'), this.innerSameKey(k, 'line-2')]);
  }

  /** The same nested call twice in a row, on one key the chain did not hold before (e.g. a helper called for two lines). */
  @WriteLock('jo:{0}')
  async outerSequential(k: string): Promise<void> {
    await insert(this.locks.manager, k, 'outer');
    await this.innerSameKey(k, 'first');
    await this.innerSameKey(k, 'second');
  }

  @WriteLock('jm:{0}', { strategy: 'lease', timeoutMs: 2_000 })
  async innerLeaseSameKey(k: string, who: string): Promise<void> {
    await insert(this.locks.manager, k, who);
  }

  /** A row-lock outer calling a lease-locked helper twice on one key. */
  @WriteLock('jo:{0}', { strategy: 'row-lock' })
  async rowOuterSequentialLease(k: string): Promise<void> {
    await insert(this.locks.manager, k, 'outer');
    await this.innerLeaseSameKey(k, 'first');
    await this.innerLeaseSameKey(k, 'second');
  }

  @Semaphore('js:{0}', 1, { timeoutMs: 2_000 })
  async permitOne(k: string, who: string): Promise<void> {
    await insert(this.locks.manager, k, who);
  }

  @WriteLock('jo:{0}')
  async outerPermitTwice(k: string): Promise<void> {
    await this.permitOne(k, 'first');
    await this.permitOne(k, 'second');
  }

  @ReadLock('ju:{0}', { timeoutMs: 2_000 })
  async readHelper(k: string): Promise<void> {
    await insert(this.locks.manager, k, 'read');
  }

  @WriteLock('ju:{0}', { timeoutMs: 2_000 })
  async writeHelper(k: string): Promise<void> {
    await insert(this.locks.manager, k, 'write');
  }

  @WriteLock('jo:{0}')
  async outerReadThenWrite(k: string): Promise<void> {
    await this.readHelper(k);
    await this.writeHelper(k);
  }

  @WriteLock('jo:{0}')
  async outerThen(k: string, inner: () => Promise<unknown>, then: () => Promise<void>): Promise<void> {
    await insert(this.locks.manager, k, 'outer');
    await inner();
    await then();
  }
}
