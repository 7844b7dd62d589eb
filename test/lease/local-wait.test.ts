import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import { LockTimeoutError, type LockService } from '../../lib/index.js';
import { createLockApp } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';
import { lockRoundTrips, stall } from '../support/lock-internals.js';
import { contractSuite } from '../support/contract-targets.js';
import { tapStatements } from '../support/statement-tap.js';

// Waiters behind a lock held by their own process wait on the local release, not on the database:
// a doomed grant costs a 13-statement round trip (seen in the benchmark's contention figures).
contractSuite('lease-handoff', 'waiting behind a local holder', { postgres: true }, (target) => {
  let db: TestDatabase;
  let app: INestApplicationContext;
  let locks: LockService;
  before(async () => {
    db = await TestDatabase.forTarget(target);
    // No janitor: its own cluster-wide lock is taken through the lock path and would add a grant
    // (and a release) to the lock round trips counted below whenever its timer fires mid-test.
    ({ app, locks } = await createLockApp(db.settings, target.options({ leaseMs: 5000, janitor: false })));
  });
  after(async () => {
    await app?.close();
    await db?.drop();
  });

  it('sends no grant while a local lock conflicts, and gets the lock on local release', async () => {
    // What went out on every connection while counting, for the failure message.
    const sent: string[] = [];
    let recording = false;
    tapStatements((sql) => {
      if (recording) sent.push(`${performance.now().toFixed(1)} ${sql.replace(/\s+/g, ' ').slice(0, 160)}`);
    });
    const holder = await locks.acquire('local:a');
    recording = true;
    // Lock round trips only: the watchdog's renewals and the janitor's statements are not counted.
    const before = lockRoundTrips(locks);
    assert.equal(await locks.tryAcquire('local:a'), null);
    await assert.rejects(locks.acquire('local:a', { timeoutMs: 150 }), LockTimeoutError);
    const waiters = [1, 2, 3].map(() => locks.acquire('local:a', { timeoutMs: 5000 }));
    await new Promise((r) => setTimeout(r, 100));
    assert.equal(lockRoundTrips(locks) - before, 0, 'no round trip while the local holder holds the key');
    await holder.release(); // 1 round trip
    for (const waiter of waiters) await (await waiter).release(); // each: 1 grant + 1 release
    recording = false;
    assert.equal(lockRoundTrips(locks) - before, 1 + 3 * 2, `no doomed grant was sent by any new head; sent:\n${sent.join('\n')}`);
  });

  it('still takes over its own holder whose lease ran out unrenewed', async () => {
    const stale = await locks.acquire('local:b', { leaseMs: 200 });
    await stall(locks, stale); // nothing renews it, nothing gives it back
    const waiting = locks.acquire('local:b', { timeoutMs: 3000 }); // blocked locally at first
    const fresh = await waiting;
    assert.ok(fresh.fencingToken > stale.fencingToken);
    await assert.rejects(stale.release(), { name: 'LockLostError' });
    await fresh.release();
  });
});
