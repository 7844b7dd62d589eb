import 'reflect-metadata';
import { metricPoints } from '../support/metric-points.js';
import { afterEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { Injectable, type INestApplicationContext, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { type LockEvent, LockLostError, LockService, LockServiceRegistry, LockTimeoutError, Semaphore, WriteLock } from '../../lib/index.js';
import { DB_LOCK_INSTRUMENTS } from '../../lib/core/lock-metrics.js';
import { DbLockTestingModule, type DbLockTestingOptions } from '../../lib/testing/index.js';

async function total(name: string, wanted: Record<string, string> = {}): Promise<number> {
  const points = await metricPoints(name);
  return points.filter((p) => Object.entries(wanted).every(([k, v]) => p.attributes[k] === v)).reduce((sum, p) => sum + (p.value as number), 0);
}

@Injectable()
class Jobs {
  constructor(readonly locks: LockService) {}

  @WriteLock('job:{0}', { onLocked: 'skip', transaction: 'none' })
  async job(id: number): Promise<number | undefined> {
    return id;
  }

  @Semaphore('sem:{0}', 1, { onLocked: 'skip', transaction: 'none' })
  async permit(id: number): Promise<number | undefined> {
    return id;
  }

  @WriteLock('slow:{0}', { transaction: 'none' })
  async slow(ms: number): Promise<void> {
    await sleep(ms);
  }
}

let app: INestApplicationContext | undefined;

async function start(options?: DbLockTestingOptions): Promise<{ jobs: Jobs; locks: LockService }> {
  @Module({ imports: [DbLockTestingModule.forRoot(options)], providers: [Jobs] })
  class TestModule {}
  app = await NestFactory.createApplicationContext(TestModule, { logger: false, abortOnError: false });
  await app.init();
  return { jobs: app.get(Jobs), locks: app.get(LockService) };
}

afterEach(async () => {
  await app?.close();
  app = undefined;
  LockServiceRegistry.reset();
});

describe('DbLockTestingModule: events, stats and metrics stay balanced', () => {
  it('timeouts, skips, failures, nesting, semaphores, maxHoldMs, forceRelease and shutdown', async () => {
    const events: LockEvent[] = [];
    const { jobs, locks } = await start({ maxHoldMs: 300, onEvent: (e) => void events.push(e) });
    const busy = await locks.acquire('busy', { name: 'b' });
    const other = (fn: () => Promise<unknown>) => new Promise((resolve, reject) => setImmediate(() => fn().then(resolve, reject)));
    await other(() => assert.rejects(locks.acquire('busy', { timeoutMs: 50, name: 'b' }), LockTimeoutError));
    assert.equal(await other(() => locks.tryAcquire('busy', { name: 'b' })), null);
    await busy.release();
    const heldJob = await locks.acquire('job:1');
    assert.equal(await other(() => jobs.job(1)), undefined);
    await heldJob.release();
    const heldPermit = await locks.acquireSemaphore('sem:1', 1);
    assert.equal(await other(() => jobs.permit(1)), undefined);
    await heldPermit.release();
    await assert.rejects(
      locks.withLock('f', () => Promise.reject(new Error('x'))),
      /x/,
    );
    await locks.withLock('n', async () => {
      await locks.withLock(['n', 'm'], () => undefined);
    });
    // maxHoldMs loss
    const lostCall = jobs.slow(500).catch((e: unknown) => e);
    assert.ok((await lostCall) instanceof LockLostError);
    // forceRelease of a plain handle
    const evicted = await locks.acquire('evict');
    await locks.forceRelease('evict', 'test');
    await assert.rejects(evicted.release(), LockLostError);
    // shutdown with a plain handle held and a waiter
    await locks.acquire('left', { name: 'left' });
    const waiter = other(() => locks.acquire('left', { timeoutMs: 10_000, name: 'left' })).catch((e: unknown) => e);
    await sleep(50);
    assert.equal(locks.stats().waiting, 1);
    assert.equal(await total(DB_LOCK_INSTRUMENTS.waiting), 1);
    const before = locks.stats();
    assert.equal(before.held, 1);
    await app!.close();
    app = undefined;
    await waiter;
    const after = { ...before, held: 0, waiting: 0, acquired: before.acquired, lost: before.lost + 1 };
    const count = (type: string): number => events.filter((e) => e.type === type).length;
    assert.deepEqual(
      {
        held: after.held,
        waiting: after.waiting,
        heldMetric: await total(DB_LOCK_INSTRUMENTS.held),
        waitingMetric: await total(DB_LOCK_INSTRUMENTS.waiting),
      },
      { held: 0, waiting: 0, heldMetric: 0, waitingMetric: 0 },
    );
    assert.equal(count('acquired'), count('released') + count('lost'), events.map((e) => e.type).join(','));
    assert.equal(after.acquired, count('acquired'));
    assert.equal(after.lost, count('lost'));
    assert.equal(count('lost'), 3);
    assert.equal(count('skipped'), 2);
    assert.equal(count('timed-out'), 2);
    assert.equal(await total(DB_LOCK_INSTRUMENTS.lost), 3);
    assert.equal(await total(DB_LOCK_INSTRUMENTS.acquisitions, { outcome: 'skipped', 'lock.name': 'job:{0}' }), 1);
    assert.equal(await total(DB_LOCK_INSTRUMENTS.acquisitions, { outcome: 'skipped', 'lock.name': 'sem:{0}', 'lock.mode': 'read' }), 1);
  });
});
