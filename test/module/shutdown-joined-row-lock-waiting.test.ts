import 'reflect-metadata';
import { freshMeterProvider, metricPoints } from '../support/metric-points.js';
import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import type { LockEvent } from '../../lib/index.js';
import { DB_LOCK_INSTRUMENTS } from '../../lib/core/lock-metrics.js';
import { createLockApp, eventually } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';
import { contractSuite } from '../support/contract-targets.js';

/**
 * app.close() while a row-lock joined into another row-lock call's transaction waits behind a
 * holder of the same process. operations.md, graceful shutdown: "waiting callers are rejected",
 * running holders get shutdownTimeoutMs, "then every lock still held has its signal aborted and is
 * released". So every call settles (none is left pending on the joined wait), the held and waiting
 * gauges go back to 0, and every grant reported ends in a released or lost event.
 */

async function total(name: string): Promise<number> {
  return (await metricPoints(name)).reduce((sum, p) => sum + (p.value as number), 0);
}

contractSuite('holder-connection', 'shutdown while a joined row-lock waits', { postgres: true }, (target) => {
  let db: TestDatabase;
  before(async () => {
    db = await TestDatabase.forTarget(target);
    // The gauges are read as totals: each target's apps count into a provider of their own.
    freshMeterProvider();
  });
  after(async () => {
    await db?.drop();
  });

  it('shutdown while a joined row-lock waits behind a local row-lock holder: gauges back to 0, every grant ended', { timeout: 30_000 }, async () => {
    const events: LockEvent[] = [];
    const { app, locks } = await createLockApp(
      db.settings,
      target.options({ janitor: false, shutdownTimeoutMs: 300, onEvent: (e: LockEvent) => void events.push(e) }),
    );
    const calls: Promise<unknown>[] = [];
    const t00 = performance.now();
    const swallow = (p: Promise<unknown>) =>
      calls.push(
        p.then(
          (v) => console.log(`# ${db.type}: call resolved`, Math.round(performance.now() - t00), v),
          (e) => console.log(`# ${db.type}: call rejected`, Math.round(performance.now() - t00), String(e)),
        ),
      );
    swallow(locks.withLock('k', () => new Promise((r) => setTimeout(r, 3000)), { strategy: 'row-lock', name: 'a' }));
    await eventually(() => locks.stats().held === 1);
    swallow(
      locks.runLocked(
        'outer',
        async () =>
          locks.withLock('k', async () => new Promise((r) => setTimeout(r, 1500)), { strategy: 'row-lock', timeoutMs: 8_000, name: 'joined' }),
        { strategy: 'row-lock', name: 'outer' },
      ),
    );
    await eventually(() => locks.stats().waiting === 1 && locks.stats().held === 2);
    await new Promise((r) => setTimeout(r, 200));
    const t0 = performance.now();
    const race = (p: Promise<unknown>, what: string) =>
      Promise.race([p.then(() => what + ' done'), new Promise((r) => setTimeout(() => r(what + ' STILL PENDING'), 12_000))]);
    console.log(
      `# ${db.type}:`,
      await race(app.close(), 'close'),
      Math.round(performance.now() - t0),
      JSON.stringify(events.map((e) => e.type + ':' + e.keys.join(','))),
    );
    const settledCalls = await race(Promise.all(calls), 'calls');
    await new Promise((r) => setTimeout(r, 500));
    const acquired = events.filter((e) => e.type === 'acquired').length;
    const ended = events.filter((e) => e.type === 'released' || e.type === 'lost').length;
    const report = `held=${await total(DB_LOCK_INSTRUMENTS.held)} waiting=${await total(DB_LOCK_INSTRUMENTS.waiting)} events=${events.map((e) => e.type + ':' + e.keys.join(',')).join(' ')}`;
    assert.equal(await total(DB_LOCK_INSTRUMENTS.held), 0, report);
    assert.equal(await total(DB_LOCK_INSTRUMENTS.waiting), 0, report);
    assert.equal(acquired, ended, report);
    assert.equal(settledCalls, 'calls done', 'the runLocked call whose work waits for the joined row-lock never settles after app.close()');
  });
});
