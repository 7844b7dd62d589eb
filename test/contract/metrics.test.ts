import 'reflect-metadata';
import type { DataPoint } from '@opentelemetry/sdk-metrics';
import { freshMeterProvider, metricPoints } from '../support/metric-points.js';
import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { Injectable } from '@nestjs/common';
import type { INestApplicationContext } from '@nestjs/common';
import { LockLostError, LockService, LockTimeoutError, WriteLock } from '../../lib/index.js';
import { DB_LOCK_INSTRUMENTS } from '../../lib/core/lock-metrics.js';
import { createLockApp, eventually } from '../support/lock-app.js';
import { stall } from '../support/lock-internals.js';
import { TestDatabase } from '../support/test-database.js';
import { contractSuite } from '../support/contract-targets.js';

type Attributes = Record<string, string>;

function matches(point: DataPoint<unknown>, wanted: Attributes): boolean {
  return Object.entries(wanted).every(([key, value]) => point.attributes[key] === value);
}

/** Sum of a counter's (or up-down counter's) points whose attributes include `wanted`. */
async function total(name: string, wanted: Attributes): Promise<number> {
  return (await metricPoints(name)).filter((p) => matches(p, wanted)).reduce((sum, p) => sum + (p.value as number), 0);
}

/** How many values a histogram recorded under `wanted`, and their sum. */
async function recorded(name: string, wanted: Attributes): Promise<{ count: number; sum: number }> {
  const values = (await metricPoints(name)).filter((p) => matches(p, wanted)).map((p) => p.value as { count: number; sum: number });
  return { count: values.reduce((n, v) => n + v.count, 0), sum: values.reduce((n, v) => n + v.sum, 0) };
}

let service: LoanService;

@Injectable()
class LoanService {
  constructor(readonly locks: LockService) {
    service = this;
  }

  @WriteLock('loan:{0}')
  async approve(id: number): Promise<number> {
    return this.locks.currentLock!.fencingToken + id * 0;
  }

  /** Stalls its own lock, says so, and tries to commit once `proceed` resolves (after another holder took the key over). */
  @WriteLock('stalled:{0}', { leaseMs: 400 })
  async stallThenCommit(id: number, stalled: () => void, proceed: Promise<void>): Promise<void> {
    await stall(this.locks, this.locks.currentLock!);
    stalled();
    await proceed;
    await this.locks.manager.query('SELECT ?', [id]);
  }
}

contractSuite('metrics', 'OpenTelemetry metrics, read with the SDK against the real database (lease)', { postgres: true }, (target) => {
  let db: TestDatabase;
  let app: INestApplicationContext;
  let locks: LockService;
  let peerApp: INestApplicationContext;
  let peer: LockService;

  before(async () => {
    db = await TestDatabase.forTarget(target);
    // The totals read below start from zero on each target.
    freshMeterProvider();
    // The peer first: decorators use the service registered last under the DataSource name.
    ({ app: peerApp, locks: peer } = await createLockApp(db.settings, target.options({ janitor: false })));
    ({ app, locks } = await createLockApp(db.settings, target.options({ janitor: false }), { providers: [LoanService] }));
  });
  after(async () => {
    await app?.close();
    await peerApp?.close();
    await db?.drop();
  });

  it('a grant: acquisitions{granted}, acquire and hold durations in seconds, held up while held and down after', async () => {
    const named = { 'lock.name': 'loan', 'lock.mode': 'write', 'lock.strategy': 'lease' };
    await locks.withLock(
      'loan-7',
      async () => {
        assert.equal(await total(DB_LOCK_INSTRUMENTS.held, named), 1);
      },
      { name: 'loan' },
    );
    assert.equal(await total(DB_LOCK_INSTRUMENTS.acquisitions, { ...named, outcome: 'granted' }), 1);
    assert.equal((await recorded(DB_LOCK_INSTRUMENTS.acquireDuration, { ...named, outcome: 'granted' })).count, 1);
    const hold = await recorded(DB_LOCK_INSTRUMENTS.holdDuration, { ...named, outcome: 'released' });
    assert.equal(hold.count, 1);
    assert.ok(hold.sum > 0 && hold.sum < 10, `a hold of a few ms is a small number of seconds, got ${hold.sum}`);
    assert.equal(await total(DB_LOCK_INSTRUMENTS.held, named), 0);
  });

  it("a decorated method is named by its key template ('loan:{0}'), never by the filled-in key", async () => {
    await service.approve(7);
    await service.approve(8);
    assert.equal(await total(DB_LOCK_INSTRUMENTS.acquisitions, { 'lock.name': 'loan:{0}', outcome: 'granted' }), 2);
    const names = new Set<string>();
    for (const name of Object.values(DB_LOCK_INSTRUMENTS)) for (const p of await metricPoints(name)) names.add(String(p.attributes['lock.name']));
    assert.ok(!names.has('loan:7') && !names.has('loan:8'), `lock.name values: ${[...names].join(', ')}`);
  });

  it('a timeout and a skip are counted by outcome; a caller waiting shows in waiting until it leaves', async () => {
    const held = await peer.acquire('busy');
    await assert.rejects(locks.acquire('busy', { timeoutMs: 100, name: 'busy' }), LockTimeoutError);
    assert.equal(await locks.runLocked('busy', () => 1, { onLocked: 'skip', name: 'job' }), undefined);
    assert.equal(await total(DB_LOCK_INSTRUMENTS.acquisitions, { 'lock.name': 'busy', outcome: 'timed_out' }), 1);
    assert.equal((await recorded(DB_LOCK_INSTRUMENTS.acquireDuration, { 'lock.name': 'busy', outcome: 'timed_out' })).count, 1);
    assert.equal(await total(DB_LOCK_INSTRUMENTS.acquisitions, { 'lock.name': 'job', outcome: 'skipped' }), 1);

    const waiter = locks.acquire('busy', { timeoutMs: 10_000, name: 'busy' });
    await eventually(async () => (await total(DB_LOCK_INSTRUMENTS.waiting, { 'lock.name': 'busy' })) === 1, 5_000, 'waiting = 1');
    await held.release();
    const granted = await waiter;
    assert.equal(await total(DB_LOCK_INSTRUMENTS.waiting, { 'lock.name': 'busy' }), 0);
    await granted.release();
  });

  it("row-lock locks carry lock.strategy 'row-lock'", async () => {
    const rowLock = { 'lock.name': 'rows', 'lock.strategy': 'row-lock' };
    await locks.withLock('rows-1', () => undefined, { name: 'rows', strategy: 'row-lock' });
    const held = await peer.acquire('rows-1', { strategy: 'row-lock' });
    await assert.rejects(locks.acquire('rows-1', { name: 'rows', strategy: 'row-lock', timeoutMs: 100 }), LockTimeoutError);
    await held.release();
    assert.equal(await total(DB_LOCK_INSTRUMENTS.acquisitions, { ...rowLock, outcome: 'granted' }), 1);
    assert.equal(await total(DB_LOCK_INSTRUMENTS.acquisitions, { ...rowLock, outcome: 'timed_out' }), 1);
    assert.equal((await recorded(DB_LOCK_INSTRUMENTS.holdDuration, { ...rowLock, outcome: 'released' })).count, 1);
  });

  it('a lock force-released while held is counted lost, its hold recorded with outcome lost', async () => {
    const lock = await locks.acquire('evict', { name: 'evict' });
    await locks.forceRelease('evict', 'metrics test');
    await assert.rejects(lock.release(), LockLostError);
    assert.equal(await total(DB_LOCK_INSTRUMENTS.lost, { 'lock.name': 'evict' }), 1);
    assert.equal((await recorded(DB_LOCK_INSTRUMENTS.holdDuration, { 'lock.name': 'evict', outcome: 'lost' })).count, 1);
    assert.equal(await total(DB_LOCK_INSTRUMENTS.held, { 'lock.name': 'evict' }), 0);
  });

  it('a stalled holder taken over: the takeover is counted for the new holder, the fence refusal for the stalled one', async () => {
    assert.equal(await total(DB_LOCK_INSTRUMENTS.fenceRefused, {}), 0, 'negative control: nothing refused yet');
    let stalled!: () => void;
    const isStalled = new Promise<void>((resolve) => (stalled = resolve));
    let proceed!: () => void;
    const call = service.stallThenCommit(1, stalled, new Promise<void>((resolve) => (proceed = resolve))).catch((e: unknown) => e);
    await isStalled;
    // Taken outside the holder's call chain (it would be reentrant inside it), once the stalled lease has run out.
    const taken = await peer.acquire('stalled:1', { timeoutMs: 10_000, name: 'stalled' });
    proceed();
    const error = await call;
    await taken.release();
    assert.ok(error instanceof LockLostError, `expected LockLostError, got ${String(error)}`);
    assert.equal(await total(DB_LOCK_INSTRUMENTS.fenceRefused, { 'lock.name': 'stalled:{0}', 'lock.strategy': 'lease' }), 1);
    assert.equal(await total(DB_LOCK_INSTRUMENTS.takeovers, { 'lock.name': 'stalled', 'lock.mode': 'write', 'lock.strategy': 'lease' }), 1);
  });
});
