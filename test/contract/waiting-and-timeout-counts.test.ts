import 'reflect-metadata';
import { metricPoints } from '../support/metric-points.js';
import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { Injectable, type INestApplicationContext } from '@nestjs/common';
import { DataSource, type QueryRunner } from 'typeorm';
import { type LockEvent, LockService, LockTimeoutError, Semaphore, WriteLock } from '../../lib/index.js';
import { DB_LOCK_INSTRUMENTS } from '../../lib/core/lock-metrics.js';
import { createLockApp, eventually } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';
import { contractSuite } from '../support/contract-targets.js';

type Attributes = Record<string, string>;

async function total(name: string, wanted: Attributes = {}): Promise<number> {
  return (await metricPoints(name))
    .filter((p) => Object.entries(wanted).every(([k, v]) => p.attributes[k] === v))
    .reduce((sum, p) => sum + (p.value as number), 0);
}

@Injectable()
class Jobs {
  constructor(readonly locks: LockService) {}

  @WriteLock('job:{0}', { onLocked: 'skip' })
  async job(id: number): Promise<number | undefined> {
    return id;
  }

  @Semaphore('sem:{0}', 1, { onLocked: 'skip' })
  async permit(id: number): Promise<number | undefined> {
    return id;
  }

  @WriteLock('boom:{0}')
  async boom(id: number): Promise<number> {
    throw new Error(`boom ${id}`);
  }
}

contractSuite('observability', 'metrics, events and stats stay balanced', { postgres: true }, (target) => {
  let db: TestDatabase;
  let app: INestApplicationContext;
  let locks: LockService;
  let peerApp: INestApplicationContext;
  let peer: LockService;
  let jobs: Jobs;
  const events: LockEvent[] = [];

  before(async () => {
    db = await TestDatabase.forTarget(target);
    ({ app: peerApp, locks: peer } = await createLockApp(db.settings, target.options({ janitor: false })));
    ({ app, locks } = await createLockApp(db.settings, target.options({ janitor: false, onEvent: (e: LockEvent) => void events.push(e) }), {
      providers: [Jobs],
    }));
    jobs = app.get(Jobs);
  });
  after(async () => {
    await app?.close();
    await peerApp?.close();
    await db?.drop();
  });

  it('a row-lock nested in an open fenced transaction, waiting in the server, counts as waiting (stats and db_lock.waiting)', async () => {
    let blockerAgain!: Awaited<ReturnType<LockService['acquire']>>;
    const blocker = await peer.acquire('nest-b', { strategy: 'row-lock' });
    // Control: a top-level row-lock caller waiting in the server for the same key is counted.
    const top = locks.acquire('nest-b', { strategy: 'row-lock', timeoutMs: 5_000, name: 'top' });
    await eventually(() => locks.stats().waiting === 1, 3_000, 'control: a top-level row-lock waiter counted');
    assert.equal(await total(DB_LOCK_INSTRUMENTS.waiting, { 'lock.name': 'top' }), 1, 'control: db_lock.waiting{top}');
    await blocker.release();
    await (await top).release();
    await peer.acquire('nest-b', { strategy: 'row-lock' }).then((h) => (blockerAgain = h));
    let seenStats = -1;
    let seenMetric = -1;
    const outer = locks.withLock('nest-a', () => locks.withLock('nest-b', () => 'inner', { strategy: 'row-lock', timeoutMs: 5_000, name: 'inner' }), {
      strategy: 'row-lock',
      name: 'outer',
    });
    try {
      // The nested call is now waiting in the server behind the peer's row lock.
      await sleep(800);
      seenStats = locks.stats().waiting;
      seenMetric = await total(DB_LOCK_INSTRUMENTS.waiting, { 'lock.name': 'inner' });
    } finally {
      await blockerAgain.release();
    }
    assert.equal(await outer, 'inner');
    assert.deepEqual(
      { statsWaiting: seenStats, metricWaiting: seenMetric },
      { statsWaiting: 1, metricWaiting: 1 },
      'one caller was waiting for nest-b: stats().waiting and db_lock.waiting{lock.name=inner} should say 1',
    );
  });

  it("a lease runLocked that times out waiting for its transaction's connection (LockTimeoutError) is reported as timed out, as row-lock's is", async () => {
    const dataSource = app.get(DataSource);
    const seen: Record<string, { error: string; types: string[]; timedOut: number; metricTimedOut: number }> = {};
    for (const strategy of ['row-lock', 'lease'] as const) {
      const held: QueryRunner[] = [];
      for (let i = 0; i < 10; i++) {
        const runner = dataSource.createQueryRunner();
        await runner.connect();
        held.push(runner);
      }
      events.length = 0;
      const before = locks.stats().timedOut;
      const name = `pool-${strategy}`;
      // The meter is the process's: the count goes on from other targets' runs of this test in this file.
      const timedOutBefore = await total(DB_LOCK_INSTRUMENTS.acquisitions, { 'lock.name': name, outcome: 'timed_out' });
      let error: unknown;
      try {
        await locks.runLocked(`pool-${strategy}`, () => 'ran', { strategy, timeoutMs: 400, name });
      } catch (e) {
        error = e;
      } finally {
        for (const runner of held) await runner.release();
      }
      seen[strategy] = {
        error: (error as Error | undefined)?.name ?? 'none',
        types: events.map((e) => e.type),
        timedOut: locks.stats().timedOut - before,
        metricTimedOut: (await total(DB_LOCK_INSTRUMENTS.acquisitions, { 'lock.name': name, outcome: 'timed_out' })) - timedOutBefore,
      };
    }
    assert.equal(seen['row-lock']!.error, 'LockTimeoutError', JSON.stringify(seen));
    assert.deepEqual(seen['row-lock']!.types, ['timed-out'], `control (row-lock): ${JSON.stringify(seen)}`);
    assert.equal(seen.lease!.error, 'LockTimeoutError', JSON.stringify(seen));
    assert.deepEqual(
      {
        timedOutEvents: seen.lease!.types.filter((t) => t === 'timed-out').length,
        timedOut: seen.lease!.timedOut,
        metric: seen.lease!.metricTimedOut,
      },
      { timedOutEvents: 1, timedOut: 1, metric: 1 },
      `lease: a LockTimeoutError is a wait that ran out; seen ${JSON.stringify(seen)}`,
    );
  });

  it('balance after timeouts, skips, failures, bad input, nesting and semaphores', async () => {
    events.length = 0;
    const before = locks.stats();
    for (const strategy of ['lease', 'row-lock'] as const) {
      const name = `bal-${strategy}`;
      const busy = await peer.acquire(`busy-${strategy}`, { strategy });
      await assert.rejects(locks.acquire(`busy-${strategy}`, { strategy, timeoutMs: 150, name }), LockTimeoutError);
      assert.equal(await locks.tryAcquire(`busy-${strategy}`, { strategy, name }), null);
      assert.equal(await locks.runLocked(`busy-${strategy}`, () => 1, { strategy, onLocked: 'skip', name }), undefined);
      await assert.rejects(locks.acquire(`busy-${strategy}`, { strategy, timeoutMs: 300, maxAttempts: 2, name }), LockTimeoutError);
      await busy.release();
      await assert.rejects(
        locks.withLock(`fail-${strategy}`, () => Promise.reject(new Error('x')), { strategy, name }),
        /x/,
      );
      await assert.rejects(
        locks.runLocked(`fail-${strategy}`, () => Promise.reject(new Error('y')), { strategy, name }),
        /y/,
      );
      await assert.rejects(locks.acquire('', { strategy, name }));
      await assert.rejects(locks.acquire(`ok-${strategy}`, { strategy, timeoutMs: -1 }));
      await assert.rejects(locks.withLock(`ok-${strategy}`, undefined as never, { strategy }));
      // Nested, reentrant and partly new keys.
      await locks.withLock(
        `n1-${strategy}`,
        async () => {
          await locks.withLock(`n1-${strategy}`, () => undefined, { strategy, name });
          await locks.withLock([`n1-${strategy}`, `n2-${strategy}`], () => undefined, { strategy, name });
          await locks.withLock(`n1-${strategy}`, () => undefined, { strategy, name, mode: 'read' });
          await assert.rejects(
            locks.withLock(`n3-${strategy}`, () => Promise.reject(new Error('inner')), { strategy, name }),
            /inner/,
          );
        },
        { strategy, name },
      );
      await locks.withLock(`r-${strategy}`, () => assert.rejects(locks.acquire(`r-${strategy}`, { strategy })), { strategy, mode: 'read', name });
    }
    // Decorators.
    const heldJob = await peer.acquire('job:1');
    assert.equal(await jobs.job(1), undefined);
    await heldJob.release();
    assert.equal(await jobs.job(1), 1);
    await assert.rejects(jobs.boom(1), /boom 1/);
    // Semaphores.
    const permit = await peer.acquireSemaphore('sem:1', 1);
    assert.equal(await jobs.permit(1), undefined);
    await assert.rejects(locks.acquireSemaphore('sem:1', 1, { timeoutMs: 100 }), LockTimeoutError);
    await assert.rejects(locks.acquireSemaphore('sem:1', 2, { timeoutMs: 100 }));
    await permit.release();
    assert.equal(await jobs.permit(1), 1);
    await locks.withSemaphore('sem:2', 2, async () => {
      await locks.withSemaphore('sem:2', 2, () => undefined);
      await assert.rejects(locks.withLock('sem:2', () => undefined));
    });

    const after = locks.stats();
    const count = (type: string): number => events.filter((e) => e.type === type).length;
    assert.equal(after.held, 0, 'stats().held');
    assert.equal(after.waiting, 0, 'stats().waiting');
    assert.equal(await total(DB_LOCK_INSTRUMENTS.held), 0, 'db_lock.held');
    assert.equal(await total(DB_LOCK_INSTRUMENTS.waiting), 0, 'db_lock.waiting');
    assert.equal(after.acquired - before.acquired, count('acquired'), 'acquired');
    assert.equal(after.released - before.released, count('released'), 'released');
    assert.equal(after.timedOut - before.timedOut, count('timed-out'), 'timed-out');
    assert.equal(after.skipped - before.skipped, count('skipped'), 'skipped');
    assert.equal(count('acquired'), count('released') + count('lost'), 'each grant ends once');
    assert.equal(count('lost'), 0);
    assert.equal(count('skipped'), 4);
    assert.equal(count('timed-out'), 7);
    const names = new Set<string>();
    for (const instrument of Object.values(DB_LOCK_INSTRUMENTS))
      for (const p of await metricPoints(instrument)) names.add(String(p.attributes['lock.name']));
    for (const n of names) assert.ok(!/:\d/.test(n) || n.includes('{'), `a filled-in key as lock.name: ${n}`);
  });
});
