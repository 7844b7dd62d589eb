import 'reflect-metadata';
import { afterEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { setImmediate as yieldTurn } from 'node:timers/promises';
import { Injectable, type INestApplicationContext, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import type { EntityManager } from 'typeorm';
import {
  DbLockError,
  DbLockNotInitializedError,
  DbLockOptionsError,
  type LockEvent,
  LockLostError,
  LockService,
  LockServiceRegistry,
  LockTimeoutError,
  ReadLock,
  WriteLock,
} from '../../lib/index.js';
import { DbLockTestingModule, type DbLockTestingOptions } from '../../lib/testing/index.js';
import { eventually } from '../support/lock-app.js';

/** Decorated as an app would: the decorators find the in-memory service like the real one. */
@Injectable()
class LoanService {
  inside = 0;
  most = 0;

  constructor(readonly locks: LockService) {}

  @WriteLock('loan:{0}')
  async approve(id: number): Promise<{ token: number; manager: EntityManager }> {
    this.most = Math.max(this.most, ++this.inside);
    for (let turn = 0; turn < 5; turn++) await yieldTurn();
    this.inside--;
    return { token: this.locks.currentLock!.fencingToken + id * 0, manager: this.locks.manager };
  }

  @ReadLock('loan:{0}', { transaction: 'none' })
  async read(id: number, until: Promise<void>): Promise<number> {
    this.most = Math.max(this.most, ++this.inside);
    await until;
    this.inside--;
    return id;
  }

  @WriteLock('report', { onLocked: 'skip', transaction: 'none' })
  async nightlyReport(): Promise<string | undefined> {
    return 'ran';
  }

  @WriteLock('loan:{0}', { timeoutMs: 50 })
  async quick(id: number): Promise<number> {
    return id;
  }

  /** Evicted while it runs: its fenced end must refuse, as a fenced commit would. */
  @WriteLock('evicted:{0}')
  async evictedWhileRunning(id: number): Promise<number> {
    await this.locks.forceRelease(`evicted:${id}`, 'test');
    return id;
  }
}

let app: INestApplicationContext | undefined;

async function start(options?: DbLockTestingOptions): Promise<{ loans: LoanService; locks: LockService }> {
  @Module({ imports: [DbLockTestingModule.forRoot(options)], providers: [LoanService] })
  class TestModule {}
  app = await NestFactory.createApplicationContext(TestModule, { logger: false, abortOnError: false });
  await app.init();
  return { loans: app.get(LoanService), locks: app.get(LockService) };
}

afterEach(async () => {
  await app?.close();
  app = undefined;
  LockServiceRegistry.reset();
});

describe('DbLockTestingModule: decorated services with no database', () => {
  const manager = { marker: 'the test manager' } as unknown as EntityManager;

  it('provides a LockService under the real token; the decorators lock through it and hand out the given manager', async () => {
    const { loans, locks } = await start({ manager });
    assert.ok(locks instanceof LockService);
    const results = await Promise.all([loans.approve(7), loans.approve(7), loans.approve(7)]);
    assert.equal(loans.most, 1, 'calls on one key never overlap');
    assert.deepEqual(results.map((r) => r.token).sort(), [1, 2, 3]);
    assert.ok(results.every((r) => r.manager === manager));
    loans.most = 0;
    await Promise.all([loans.approve(1), loans.approve(2), loans.approve(3)]);
    assert.ok(loans.most > 1, 'negative control: calls on different keys overlap');
  });

  it('without a manager, lockService.manager throws a typed error that names the missing option', async () => {
    const { loans } = await start();
    await assert.rejects(loans.approve(1), (error: unknown) => error instanceof DbLockError && /forRoot\(\{ manager \}\)/.test(error.message));
  });

  it('readers share a key, a writer waits for them; timeouts and skips are the real typed outcomes', async () => {
    const { loans, locks } = await start();
    let open!: () => void;
    const until = new Promise<void>((resolve) => (open = resolve));
    const readers = Promise.all([loans.read(5, until), loans.read(5, until)]);
    await eventually(() => loans.inside === 2, 2_000, 'both readers inside');
    await assert.rejects(loans.quick(5), LockTimeoutError);
    const held = await locks.acquire('report');
    assert.equal(await loans.nightlyReport(), undefined);
    await held.release();
    assert.equal(await loans.nightlyReport(), 'ran');
    open();
    assert.deepEqual(await readers, [5, 5]);
  });

  it('a lock force-released while its method runs: the call fails with LockLostError, the key is free', async () => {
    const events: LockEvent[] = [];
    const { loans, locks } = await start({ manager, onEvent: (event) => events.push(event) });
    await assert.rejects(loans.evictedWhileRunning(3), LockLostError);
    assert.ok(events.some((e) => e.type === 'lost' && e.keys.includes('evicted:3')));
    assert.equal((await locks.inspect('evicted:3')).holders.length, 0);
    const again = await locks.acquire('evicted:3', { timeoutMs: 0 });
    assert.equal(again.fencingToken, 2);
    await again.release();
  });

  it('inspect and listLocks report holders; shutdown ends them and later calls get DbLockNotInitializedError', async () => {
    const { locks } = await start({ namespace: 'app' });
    const held = await locks.acquire(['a', { key: 'b', mode: 'read' }]);
    const info = await locks.inspect('a');
    assert.equal(info.mode, 'write');
    assert.equal(info.holders[0]!.fencingToken, 1);
    assert.deepEqual((await locks.listLocks()).locks.map((l) => `${l.key}:${l.mode}`).sort(), ['a:write', 'b:read']);
    await app!.close();
    app = undefined;
    assert.equal(held.signal.aborted, true);
    await assert.rejects(locks.acquire('a'), DbLockNotInitializedError);
  });

  it('writer preference can be turned off: then a new reader gets in while a writer waits (negative control of the shared suite)', async () => {
    const { locks } = await start({ writerPreference: false });
    const reader = await locks.acquire('rw', { mode: 'read' });
    const writer = locks.acquire('rw', { timeoutMs: 5_000 });
    const late = await locks.acquire('rw', { mode: 'read', timeoutMs: 200 });
    await late.release();
    await reader.release();
    await (await writer).release();
  });

  it('bad options are refused with the real typed errors', async () => {
    assert.throws(() => DbLockTestingModule.forRoot({ manager: 5 as unknown as EntityManager }), DbLockOptionsError);
    await assert.rejects(start({ leaseMs: -1 }), DbLockOptionsError);
    const { locks } = await start();
    await assert.rejects(locks.acquire('k', { name: '' }), DbLockOptionsError);
    await assert.rejects(locks.acquire(''), DbLockError);
  });
});
