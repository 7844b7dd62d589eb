import 'reflect-metadata';
import { freshMeterProvider, metricPoints } from '../support/metric-points.js';
import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { LockService, WriteLock } from '../../lib/index.js';
import { DB_LOCK_INSTRUMENTS } from '../../lib/core/lock-metrics.js';
import { createLockApp, eventually } from '../support/lock-app.js';
import { sessionCount } from '../support/server-sessions.js';
import { TestDatabase } from '../support/test-database.js';
import { contractSuite } from '../support/contract-targets.js';

/**
 * app.close() while a row-lock taken inside a lease call's fenced transaction (joined: README
 * "Nested calls") waits in the server behind another process's holder. operations.md, graceful
 * shutdown: "Row-lock callers waiting inside the server are cut loose at once and rejected like the
 * others, rather than waited for until their own timeout", and afterwards the library has "no
 * timer, socket or connection left open". So: no hang to the waiter's 8 s budget, a settled
 * call, the gauges back to 0, and no session of the app outliving close().
 */

let jobs: Jobs;
@Injectable()
class Jobs {
  constructor(readonly locks: LockService) {
    jobs = this;
  }
  /** A fenced lease call whose work takes a row-lock inside its transaction (joined), behind another process's holder. */
  @WriteLock('outer:{0}', { timeoutMs: 15_000 })
  async outer(id: number): Promise<number> {
    await this.locks.withLock('inner-row', () => 1, { strategy: 'row-lock', timeoutMs: 8_000, name: 'inner' });
    return id;
  }
}

contractSuite('holder-connection', 'shutdown with a row-lock waiting in the server inside a fenced transaction', { postgres: true }, (target) => {
  let db: TestDatabase;
  before(async () => {
    db = await TestDatabase.forTarget(target);
    // The gauges are read as totals: each target's apps count into a provider of their own.
    freshMeterProvider();
  });
  after(async () => {
    await db?.drop();
  });

  it('app.close() cuts the joined waiter at once: no hang, typed rejection, gauges 0, no connection left', { timeout: 30_000 }, async () => {
    const peer = await createLockApp(db.settings, target.options({ janitor: false }));
    // The outer call must be a lease call (its fenced transaction is what the row-lock joins).
    const main = await createLockApp(db.settings, { janitor: false, shutdownTimeoutMs: 300, strategy: 'lease' }, { providers: [Jobs] });
    let closed = false;
    try {
      const held = await peer.locks.acquire('inner-row', { strategy: 'row-lock' });
      const t0 = performance.now();
      const call = jobs.outer(1).then(
        () => ({ outcome: 'resolved', at: performance.now() - t0 }),
        (e: unknown) => ({ outcome: (e as Error).name, at: performance.now() - t0 }),
      );
      await eventually(async () => (await db.lockWaits()) >= 1, 5_000, 'the joined row-lock waits in the server');
      const c0 = performance.now() - t0;
      const ds = main.app.get(DataSource);
      const destroy = ds.destroy.bind(ds);
      ds.destroy = async () => {
        console.log(`# DataSource.destroy called at ${Math.round(performance.now() - t0)} ms`);
        await destroy();
        console.log(`# DataSource destroyed at ${Math.round(performance.now() - t0)} ms`);
      };
      const closing = main.app.close().then(() => performance.now() - t0);
      const settled = await Promise.race([
        call,
        new Promise<{ outcome: string; at: number }>((r) => setTimeout(() => r({ outcome: 'pending', at: NaN }), 4_000)),
      ]);
      const closedAt = await Promise.race([closing, new Promise<number>((r) => setTimeout(() => r(NaN), 10_000))]);
      closed = !Number.isNaN(closedAt);
      const waiting = (await metricPoints(DB_LOCK_INSTRUMENTS.waiting))
        .filter((p) => p.attributes['lock.name'] === 'inner')
        .reduce((s, p) => s + (p.value as number), 0);
      const heldG = (await metricPoints(DB_LOCK_INSTRUMENTS.held))
        .filter((p) => p.attributes['lock.name'] === 'outer:{0}')
        .reduce((s, p) => s + (p.value as number), 0);
      const eventual = await call;
      console.log(`# ${db.type}: the call eventually settled at ${Math.round(eventual.at)} ms with ${eventual.outcome}`);
      console.log(
        `# ${db.type}: close began at ${Math.round(c0)} ms, call settled at ${Math.round(settled.at)} ms (${settled.outcome}), close done at ${Math.round(closedAt)} ms`,
      );
      await held.release();
      // Margins: the inner caller's budget is 8 s; shutdownTimeoutMs 300 ms; 3 s after close began is ample.
      assert.deepEqual(
        { settledWithin3s: settled.at - c0 < 3_000, closeWithin3s: closedAt - c0 < 3_000, typed: settled.outcome !== 'pending', waiting, heldG },
        { settledWithin3s: true, closeWithin3s: true, typed: true, waiting: 0, heldG: 0 },
      );
    } finally {
      if (!closed) await main.app.close();
      await peer.app.close();
    }
    // The cut session's server process may still be rolling back for a moment after close: 3 s margin.
    await eventually(async () => (await sessionCount(db)) === 0, 3_000, 'no connection left');
  });
});
