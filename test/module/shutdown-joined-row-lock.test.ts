import 'reflect-metadata';
import { metricPoints } from '../support/metric-points.js';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { LockService, WriteLock } from '../../lib/index.js';
import { DB_LOCK_INSTRUMENTS } from '../../lib/core/lock-metrics.js';
import { createLockApp, eventually } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';

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

describe('shutdown with a row-lock waiting in the server inside a fenced transaction', () => {
  let db: TestDatabase;
  before(async () => {
    db = await TestDatabase.create();
  });
  after(async () => {
    await db?.drop();
  });

  it('app.close() cuts the joined waiter at once: no hang, typed rejection, gauges 0, no connection left', async () => {
    const peer = await createLockApp(db.settings, { janitor: false });
    const main = await createLockApp(db.settings, { janitor: false, shutdownTimeoutMs: 300 }, { providers: [Jobs] });
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
      console.log(`# the call eventually settled at ${Math.round(eventual.at)} ms with ${eventual.outcome}`);
      console.log(
        `# close began at ${Math.round(c0)} ms, call settled at ${Math.round(settled.at)} ms (${settled.outcome}), close done at ${Math.round(closedAt)} ms`,
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
    // The cut session's server thread may still be rolling back for a moment after close: 3 s margin.
    const left = async () =>
      Number(
        (
          await db.query<{ n: number }[]>(`SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST WHERE DB = ? AND ID <> CONNECTION_ID()`, [
            db.name,
          ])
        )[0]!.n,
      );
    await eventually(async () => (await left()) === 0, 3_000, 'no connection left');
  });
});
