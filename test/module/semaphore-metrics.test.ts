import 'reflect-metadata';
import type { DataPoint } from '@opentelemetry/sdk-metrics';
import { freshMeterProvider, metricPoints } from '../support/metric-points.js';
import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { Injectable } from '@nestjs/common';
import type { INestApplicationContext } from '@nestjs/common';
import { LockLostError, LockService, Semaphore, type LockEvent } from '../../lib/index.js';
import { DB_LOCK_INSTRUMENTS } from '../../lib/core/lock-metrics.js';
import { createLockApp, eventually } from '../support/lock-app.js';
import { stall } from '../support/lock-internals.js';
import { TestDatabase } from '../support/test-database.js';
import { contractSuite } from '../support/contract-targets.js';
import { runSql } from '../support/portable-sql.js';

/**
 * OpenTelemetry metrics, events and stats of semaphore calls (README: "Timeouts,
 * maxAttempts, onLocked, events, stats and metrics work as for locks (a permit is reported with
 * mode 'read')"; metrics guide: a decorator is named by its key template).
 */
type Attributes = Record<string, string>;
const matches = (p: DataPoint<unknown>, wanted: Attributes) => Object.entries(wanted).every(([k, v]) => p.attributes[k] === v);
async function total(name: string, wanted: Attributes): Promise<number> {
  return (await metricPoints(name)).filter((p) => matches(p, wanted)).reduce((sum, p) => sum + (p.value as number), 0);
}
async function recorded(name: string, wanted: Attributes): Promise<number> {
  return (await metricPoints(name)).filter((p) => matches(p, wanted)).reduce((n, p) => n + (p.value as { count: number }).count, 0);
}

let service: ExportService;

@Injectable()
class ExportService {
  constructor(readonly locks: LockService) {
    service = this;
  }

  @Semaphore('export:{0}', 2, { transaction: 'none', timeoutMs: 5_000 })
  async run(tenant: string, until: Promise<void>): Promise<number> {
    await until;
    return this.locks.currentLock!.fencingToken + tenant.length * 0;
  }

  @Semaphore('export-skip:{0}', 1, { onLocked: 'skip', transaction: 'none' })
  async skipper(tenant: string, until: Promise<void>): Promise<string | undefined> {
    await until;
    return tenant;
  }

  @Semaphore('stalled-sem:{0}', 2, { leaseMs: 400 })
  async stallThenCommit(id: number, stalled: () => void, proceed: Promise<void>): Promise<void> {
    await stall(this.locks, this.locks.currentLock!);
    stalled();
    await proceed;
    await runSql(this.locks.manager, 'SELECT ?', [id]);
  }
}

contractSuite('metrics', 'metrics, events and stats of semaphore calls', { postgres: true }, (target) => {
  let db: TestDatabase;
  let app: INestApplicationContext;
  let peerApp: INestApplicationContext;
  let peer: LockService;
  const events: LockEvent[] = [];

  before(async () => {
    // Totals are read per target: the apps of this target count into a provider of their own.
    freshMeterProvider();
    db = await TestDatabase.forTarget(target);
    ({ app: peerApp, locks: peer } = await createLockApp(db.settings, target.options({ janitor: false })));
    ({ app } = await createLockApp(db.settings, target.options({ janitor: false, onEvent: (e: LockEvent) => events.push(e) }), {
      providers: [ExportService],
    }));
  });
  after(async () => {
    await app?.close();
    await peerApp?.close();
    await db?.drop();
  });

  it("@Semaphore: granted, timed out and skipped counted under the key template with mode 'read'; held and waiting back to 0", async () => {
    let open!: () => void;
    const gate = new Promise<void>((r) => (open = r));
    const a = service.run('t1', gate);
    const b = service.run('t1', gate);
    await eventually(() => service.locks.stats().held === 2, 5_000, 'two permits held');
    assert.equal(
      await total(DB_LOCK_INSTRUMENTS.held, { 'lock.name': 'export:{0}', 'lock.mode': 'read', 'lock.strategy': 'lease' }),
      2,
      'held: 2 permits',
    );
    const c = service.run('t1', Promise.resolve());
    await eventually(() => service.locks.stats().waiting === 1, 5_000, 'third waits');
    assert.equal(await total(DB_LOCK_INSTRUMENTS.waiting, { 'lock.name': 'export:{0}', 'lock.mode': 'read' }), 1, 'waiting: 1 permit caller');
    const s1 = service.skipper('t2', gate);
    await eventually(() => service.locks.stats().held === 3, 5_000, 'skipper holds');
    const s2 = await service.skipper('t2', Promise.resolve());
    assert.equal(s2, undefined, 'second skipper skipped');
    open();
    await Promise.all([a, b, c, s1]);
    assert.equal(await total(DB_LOCK_INSTRUMENTS.acquisitions, { 'lock.name': 'export:{0}', 'lock.mode': 'read', outcome: 'granted' }), 3);
    assert.equal(await total(DB_LOCK_INSTRUMENTS.acquisitions, { 'lock.name': 'export-skip:{0}', 'lock.mode': 'read', outcome: 'granted' }), 1);
    assert.equal(await total(DB_LOCK_INSTRUMENTS.acquisitions, { 'lock.name': 'export-skip:{0}', 'lock.mode': 'read', outcome: 'skipped' }), 1);
    assert.equal(await recorded(DB_LOCK_INSTRUMENTS.holdDuration, { 'lock.name': 'export:{0}', outcome: 'released' }), 3, 'hold durations');
    assert.equal(await total(DB_LOCK_INSTRUMENTS.held, { 'lock.name': 'export:{0}' }), 0, 'held back to 0');
    assert.equal(await total(DB_LOCK_INSTRUMENTS.waiting, { 'lock.name': 'export:{0}' }), 0, 'waiting back to 0');
    const names = new Set((await metricPoints(DB_LOCK_INSTRUMENTS.acquisitions)).map((p) => String(p.attributes['lock.name'])));
    assert.ok(![...names].some((n) => n.includes('t1') || n.includes('t2')), `a filled-in key used as a name: ${[...names].join(', ')}`);
    const mine = events.filter((e) => e.keys.some((k) => k.startsWith('export')));
    assert.deepEqual(
      mine.map((e) => e.mode).filter((m) => m !== 'read'),
      [],
      'every permit event has mode read',
    );
    assert.equal(mine.filter((e) => e.type === 'skipped').length, 1, 'one skipped event');
  });

  it('a stalled @Semaphore holder taken over: takeover counted for the taker, fence refusal for the stalled one', async () => {
    let stalled!: () => void;
    const isStalled = new Promise<void>((resolve) => (stalled = resolve));
    let proceed!: () => void;
    const call = service.stallThenCommit(1, stalled, new Promise<void>((resolve) => (proceed = resolve))).catch((e: unknown) => e);
    await isStalled;
    const p1 = await peer.acquireSemaphore('stalled-sem:1', 2, { timeoutMs: 10_000, name: 'sem-taker' });
    // The key has room for a second permit: only a caller that finds it full takes the stalled one over.
    const p2 = await peer.acquireSemaphore('stalled-sem:1', 2, { timeoutMs: 10_000, name: 'sem-taker' });
    proceed();
    const error = await call;
    await p1.release();
    await p2.release();
    assert.ok(error instanceof LockLostError, `expected LockLostError, got ${String(error)}`);
    assert.equal(await total(DB_LOCK_INSTRUMENTS.fenceRefused, { 'lock.name': 'stalled-sem:{0}', 'lock.mode': 'read' }), 1, 'fence refused');
    assert.equal(
      await total(DB_LOCK_INSTRUMENTS.takeovers, { 'lock.name': 'sem-taker', 'lock.mode': 'read', 'lock.strategy': 'lease' }),
      1,
      'takeover',
    );
    assert.equal(peer.stats().reclaimed, 1, 'peer stats reclaimed');
    const rows = await db.logRows('stalled-sem:1');
    assert.deepEqual(rows.map((r) => r.status).sort(), ['EXPIRED', 'RELEASED', 'RELEASED'], JSON.stringify(rows.map((r) => [r.status, r.note])));
  });
});
