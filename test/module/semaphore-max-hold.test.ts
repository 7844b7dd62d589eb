import 'reflect-metadata';
import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import type { INestApplicationContext } from '@nestjs/common';
import { TestDatabase } from '../support/test-database.js';
import { createLockApp, eventually } from '../support/lock-app.js';
import { LockLostError, type LockService } from '../../lib/index.js';
import { contractSuite } from '../support/contract-targets.js';

/**
 * `maxHoldMs` on permits ("the signal aborts, the lock is given back"): a
 * fenced runSemaphore held past it commits nothing (LockLostError) and its permit is free for
 * another process at once, not after its lease; a withSemaphore holder's signal aborts and its
 * permit row ends.
 */
contractSuite('semaphore-calls', 'maxHoldMs on permits', { postgres: true }, (target) => {
  let db: TestDatabase;
  let a: INestApplicationContext;
  let b: INestApplicationContext;
  let la: LockService;
  let lb: LockService;
  before(async () => {
    db = await TestDatabase.forTarget(target);
    await db.query(`CREATE TABLE mh_writes (id INT PRIMARY KEY)${db.sql.tableOptions}`);
    ({ app: a, locks: la } = await createLockApp(db.settings, target.options({ leaseMs: 30_000, maxHoldMs: 600, janitor: false })));
    ({ app: b, locks: lb } = await createLockApp(db.settings, target.options({ leaseMs: 30_000, janitor: false })));
  });
  after(async () => {
    await a?.close();
    await b?.close();
    await db?.drop();
  });

  it('fenced runSemaphore past maxHoldMs: nothing committed, permit free at once', async () => {
    let inside!: () => void;
    const entered = new Promise<void>((r) => (inside = r));
    const call = la
      .runSemaphore('mh-sem', 1, async () => {
        inside();
        await la.manager.query('INSERT INTO mh_writes (id) VALUES (1)');
        await sleep(1_200);
      })
      .then(
        () => 'committed',
        (e: unknown) => e,
      );
    await entered;
    const started = performance.now();
    const other = await lb.acquireSemaphore('mh-sem', 1, { timeoutMs: 5_000 });
    const waited = Math.round(performance.now() - started);
    const outcome = await call;
    await other.release();
    assert.ok(outcome instanceof LockLostError, `expected LockLostError, got ${String(outcome)}`);
    assert.ok(waited < 3_000, `the other process waited ${waited} ms for a permit given back at maxHoldMs (lease 30 s)`);
    assert.deepEqual(await db.query('SELECT * FROM mh_writes'), [], 'nothing committed');
  });

  it('withSemaphore past maxHoldMs: signal aborts, the row ends, a new limit can be adopted', async () => {
    let aborted = false;
    const call = la
      .withSemaphore('mh-sem2', 2, async (permit) => {
        await eventually(() => permit.signal.aborted, 5_000, 'abort');
        aborted = true;
      })
      .catch((e: unknown) => e);
    await call;
    assert.equal(aborted, true);
    const live = await db.query<{ n: number }[]>(`SELECT COUNT(*) AS n FROM db_lock_log WHERE status IN ('ACQUIRED','COMPLETED')`);
    assert.equal(Number(live[0]!.n), 0, 'permit row still live after maxHoldMs');
    const p = await lb.acquireSemaphore('mh-sem2', 4, { timeoutMs: 0 });
    await p.release();
  });
});
