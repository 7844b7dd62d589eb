import 'reflect-metadata';
import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { LockService, ReadLock, WriteLock } from '../../../lib/index.js';
import { BusinessError, insert } from './entries.js';

/**
 * The services of the nested decorated calls: an outer service whose locked methods call inner
 * services locked under the other strategy, a 'skip' method, a reader and a writer of one key,
 * and methods that are not async.
 */

/** Where a nested call fails: inside the inner call, or in the outer one after the inner returned. */
export interface Failures {
  innerFails?: boolean;
  outerFails?: boolean;
}

/** A gate opened from outside. */
export function gate(): { wait: Promise<void>; open: () => void } {
  let open!: () => void;
  const wait = new Promise<void>((resolve) => (open = resolve));
  return { wait, open };
}

@Injectable()
export class InnerLease {
  constructor(readonly locks: LockService) {}
  @WriteLock('nl:{0}', { strategy: 'lease' })
  async write(k: string, fail = false): Promise<EntityManager> {
    await insert(this.locks.manager, k, 'inner-lease');
    if (fail) throw new BusinessError('inner lease failed');
    return this.locks.manager;
  }
}

@Injectable()
export class InnerRow {
  constructor(readonly locks: LockService) {}
  @WriteLock('nr:{0}', { strategy: 'row-lock' })
  async write(k: string, fail = false): Promise<EntityManager> {
    await insert(this.locks.manager, k, 'inner-row');
    if (fail) throw new BusinessError('inner row failed');
    return this.locks.manager;
  }

  @WriteLock('skipme:{0}', { onLocked: 'skip' })
  async skippable(k: string): Promise<'ran' | undefined> {
    await insert(this.locks.manager, k, 'skippable');
    return 'ran';
  }
}

@Injectable()
export class Outer {
  constructor(
    readonly locks: LockService,
    readonly lease: InnerLease,
    readonly row: InnerRow,
  ) {}

  @WriteLock('ol:{0}', { strategy: 'lease' })
  async leaseThenRow(k: string, fails: Failures = {}): Promise<boolean> {
    return this.writeThenCall(k, 'lease', () => this.row.write(k, fails.innerFails), fails);
  }

  @WriteLock('or:{0}', { strategy: 'row-lock' })
  async rowThenLease(k: string, fails: Failures = {}): Promise<boolean> {
    return this.writeThenCall(k, 'row', () => this.lease.write(k, fails.innerFails), fails);
  }

  /** The outer call's body: its own entry, then the inner call; true if the inner call ran in the outer transaction. */
  private async writeThenCall(k: string, outer: 'lease' | 'row', inner: () => Promise<EntityManager>, fails: Failures): Promise<boolean> {
    await insert(this.locks.manager, k, `outer-${outer}`);
    const same = (await inner()) === this.locks.manager;
    if (fails.outerFails) throw new BusinessError(`outer ${outer} failed`);
    return same;
  }

  @WriteLock('os:{0}')
  async withSkip(k: string): Promise<'ran' | undefined> {
    await insert(this.locks.manager, k, 'outer-skip');
    return this.row.skippable(k);
  }

  @ReadLock('rw:{0}')
  async reader(k: string, inside: Promise<void>, entered: () => void): Promise<void> {
    entered();
    await inside;
  }

  @WriteLock('rw:{0}')
  async writer(k: string): Promise<string> {
    await insert(this.locks.manager, k, 'writer');
    return 'wrote';
  }

  @ReadLock('up:{0}', { strategy: 'lease' })
  async readThenRowWrite(k: string): Promise<void> {
    await this.upgradeRow(k);
  }

  @WriteLock('up:{0}', { strategy: 'row-lock' })
  async upgradeRow(k: string): Promise<void> {
    await insert(this.locks.manager, k, 'upgraded');
  }

  /** Declared as returning any: no Promise; the decorator must still lock it, commit it and answer with a promise. */
  @WriteLock('sync:{0}')
  syncValue(k: string): any {
    return `value:${k}`;
  }

  @WriteLock('sync:{0}')
  syncThrow(k: string): any {
    throw new BusinessError(`sync ${k}`);
  }
}
