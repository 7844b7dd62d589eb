import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { TestDatabase } from '../support/test-database.js';
import { createLockApp } from '../support/lock-app.js';
import { stall } from '../support/lock-internals.js';
import { LockTimeoutError, type LockService } from '../../lib/index.js';
import type { INestApplicationContext } from '@nestjs/common';
import { appliesTo, contractSuite } from '../support/contract-targets.js';

contractSuite('basics', 'smoke', { postgres: true }, (target) => {
  let db: TestDatabase;
  let app: INestApplicationContext;
  let locks: LockService;
  before(async () => {
    db = await TestDatabase.forTarget(target);
    ({ app, locks } = await createLockApp(db.settings, target.options({ leaseMs: 1000 })));
  });
  after(async () => {
    await app?.close();
    await db?.drop();
  });

  it('acquires, excludes, releases', async () => {
    const a = await locks.acquire('k1');
    assert.equal(a.fencingToken, 1);
    await assert.rejects(locks.acquire('k1', { timeoutMs: 100 }), LockTimeoutError);
    assert.equal(await locks.tryAcquire('k1'), null);
    // A row-lock holder has no live row until its commit: inspect() sees lease holders only.
    if (!target.capabilities.has('holder-connection')) assert.equal((await locks.inspect('k1')).mode, 'write');
    await a.release();
    const b = await locks.acquire('k1');
    assert.equal(b.fencingToken, 2);
    await b.release();
    const rows = await db.logRows('k1');
    assert.deepEqual(
      rows.map((r) => r.status),
      ['RELEASED', 'RELEASED'],
    );
  });

  it('readers share, writer waits', async () => {
    const r1 = await locks.acquire('r', { mode: 'read' });
    const r2 = await locks.acquire('r', { mode: 'read' });
    assert.equal(await locks.tryAcquire('r'), null);
    await r1.release();
    await r2.release();
    const w = await locks.acquire('r');
    await w.release();
  });

  it('withLock reentrancy and waiting handoff', async () => {
    const order: string[] = [];
    await Promise.all(
      [1, 2, 3].map((i) =>
        locks.withLock('w', async () => {
          order.push(`in${i}`);
          const nested = await locks.acquire('w');
          assert.equal(nested.reentrant, true);
          await nested.release();
          await new Promise((r) => setTimeout(r, 20));
          order.push(`out${i}`);
        }),
      ),
    );
    for (let i = 0; i < order.length; i += 2) assert.equal(order[i]!.slice(2), order[i + 1]!.slice(3));
  });

  // A stalled holder is taken over only where leases expire; a stalled row-lock holder keeps its lock.
  if (appliesTo('lease-takeover', target))
    it('takeover of expired holder fences it', async () => {
      const stale = await locks.acquire('x', { leaseMs: 200 });
      await stall(locks, stale); // its holder is frozen: nothing renews it, nothing gives it back
      await new Promise((r) => setTimeout(r, 400));
      const fresh = await locks.acquire('x', { timeoutMs: 2000 });
      await assert.rejects(stale.release(), { name: 'LockLostError' });
      const info = await locks.inspect('x');
      assert.equal(info.holders.length, 1);
      assert.equal(info.holders[0]!.fencingToken, fresh.fencingToken);
      await fresh.release();
      const rows = await db.logRows('x');
      assert.deepEqual(
        rows.map((r) => r.status),
        ['EXPIRED', 'RELEASED'],
      );
    });
});

contractSuite('crash-liveness', 'smoke: processes', { postgres: true }, (target) => {
  it('a second process waits for the first and a SIGKILLed holder frees within the lease', async () => {
    const { LockWorker } = await import('../support/worker-host.js');
    const db = await TestDatabase.forTarget(target);
    const workers = await LockWorker.startMany(2, { settings: db.settings, options: target.options({ leaseMs: 500 }) });
    try {
      const scenarios = new URL('../support/scenarios/basic.js', import.meta.url).href;
      const token = await workers[0]!.run<number>(scenarios, 'acquireAndKeep', { key: 'p' });
      assert.equal(token, 1);
      const started = performance.now();
      const waiting = workers[1]!.run<number>(scenarios, 'holdFor', { key: 'p', holdMs: 0 });
      await workers[0]!.kill();
      // Row-lock: the server rolled the dead holder back, token bump and audit row included, so
      // its token is handed out again and the log holds the survivor's hold only.
      const rowLock = target.capabilities.has('holder-connection');
      assert.equal(await waiting, rowLock ? 1 : 2);
      assert.ok(performance.now() - started < 500 + 600, 'freed within lease + poll');
      const rows = await db.logRows('p');
      assert.deepEqual(
        rows.map((r) => r.status),
        rowLock ? ['RELEASED'] : ['EXPIRED', 'RELEASED'],
      );
    } finally {
      await Promise.all(workers.map((w) => w.close()));
      await db.drop();
    }
  });
});
