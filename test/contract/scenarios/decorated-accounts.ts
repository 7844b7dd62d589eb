import 'reflect-metadata';
import { setTimeout as sleep } from 'node:timers/promises';
import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { DistributedLock, LockService, ReadLock, WriteLock } from '../../../lib/index.js';
import { callerTrips } from '../../support/round-trips.js';
import { BusinessError, insert } from './entries.js';

/**
 * The service of the decorator transaction tests: nested same-key and other-key calls, an upgrade
 * attempt, a failing method, two call chains, and the `transaction: 'none'` and 'skip' options.
 */
@Injectable()
export class Accounts {
  innerManager: EntityManager | undefined;
  innerReentrant: boolean | undefined;
  constructor(readonly locks: LockService) {}

  /** Writes, then calls `inner` on the same key; reports the lock round trips that call cost. */
  @WriteLock('acct:{0}')
  async outer(id: number, failAfterInner = false): Promise<{ roundTrips: number; sameManager: boolean }> {
    const manager = this.locks.manager;
    await insert(manager, `acct:${id}`, 'outer');
    const before = callerTrips(this.locks);
    await this.inner(id);
    const roundTrips = callerTrips(this.locks) - before;
    if (failAfterInner) throw new BusinessError('after inner');
    return { roundTrips, sameManager: this.innerManager === manager };
  }

  @WriteLock('acct:{0}')
  async inner(id: number): Promise<void> {
    this.innerManager = this.locks.manager;
    this.innerReentrant = this.locks.currentLock!.reentrant;
    await insert(this.locks.manager, `acct:${id}`, 'inner');
  }

  @ReadLock('acct:{0}')
  async readThenWrite(id: number): Promise<number> {
    const before = callerTrips(this.locks);
    try {
      await this.inner(id);
    } finally {
      this.upgradeRoundTrips = callerTrips(this.locks) - before;
    }
    return 0;
  }
  upgradeRoundTrips = -1;

  /** Calls a locked method on ANOTHER key: it joins this transaction; its lock lives until this one ends. */
  @WriteLock('acct:{0}')
  async outerWithOther(id: number, other: number): Promise<{ sameManager: boolean; otherHeldAfterInner: boolean }> {
    const manager = this.locks.manager;
    await this.inner(other);
    // Held by this process still (a row-lock holder has no live row for inspect() to list).
    const held = this.locks.stats().held;
    return { sameManager: this.innerManager === manager, otherHeldAfterInner: held === 2 };
  }

  @WriteLock('acct:{0}')
  async failing(id: number): Promise<never> {
    await insert(this.locks.manager, `acct:${id}`, 'failing');
    throw new BusinessError(`failed on ${id}`);
  }

  /** Two chains in one process: records enter/leave around an await. */
  @WriteLock('chain')
  async chain(name: string, trace: string[]): Promise<void> {
    trace.push(`in:${name}`);
    await sleep(30);
    trace.push(`out:${name}`);
  }

  @DistributedLock('side-effect', 'write')
  async plain(): Promise<void> {}

  @WriteLock('none', { transaction: 'none' })
  async outsideDb(): Promise<{ token: number; signal: AbortSignal; managerError: unknown }> {
    const lock = this.locks.currentLock!;
    let managerError: unknown;
    try {
      void this.locks.manager;
    } catch (error) {
      managerError = error;
    }
    return { token: lock.fencingToken, signal: lock.signal, managerError };
  }

  @WriteLock('job', { onLocked: 'skip' })
  async job(): Promise<'ran' | undefined> {
    return 'ran';
  }
}
