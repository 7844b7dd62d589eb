import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { type LockHandle, type LockService, WriteLock } from '../../lib/index.js';
import { TestDatabase } from '../support/test-database.js';
import { createLockApp, eventually } from '../support/lock-app.js';
import { contractSuite } from '../support/contract-targets.js';
import { spyOnDataSourceStatements } from '../support/statement-spy.js';
import { partsOf } from '../support/lock-internals.js';

@Injectable()
class Jobs {
  @WriteLock('bell:decorated', { timeoutMs: 10_000 })
  async run(): Promise<string> {
    return 'ran';
  }
}

/**
 * A key whose doorbell a holder of this process rang a moment ago is contended: others were queued
 * on it. A writer of this process then waits on the bell at once, instead of asking first and
 * being refused (a refused try and the full plan's round trip on every re-request), and its caller
 * is told it waits before the wait: a decorated call opens no business transaction meanwhile.
 */
contractSuite('lease-mechanics', 'a key whose doorbell this process rang lately', (target) => {
  let db: TestDatabase;
  const apps: INestApplicationContext[] = [];
  let a: LockService;
  let b: LockService;
  let jobs: Jobs;
  let dataSourceStatements: { readonly sent: string[] };

  before(async () => {
    db = await TestDatabase.create();
    const first = await createLockApp(db.settings, { ...target.options(), janitor: false });
    const second = await createLockApp(db.settings, { ...target.options(), janitor: false }, { providers: [Jobs] });
    apps.push(first.app, second.app);
    a = first.locks;
    b = second.locks;
    jobs = second.app.get(Jobs);
    dataSourceStatements = spyOnDataSourceStatements(second.app.get(DataSource));
  });
  after(async () => {
    for (const app of apps) await app.close();
    await db.drop();
  });

  it('two processes re-requesting one key: each hold costs its grant and its release, no refused try between', async () => {
    const holdsEach = 40;
    const before = a.stats().roundTripsBy.locks + b.stats().roundTripsBy.locks;
    const loop = async (locks: LockService) => {
      for (let i = 0; i < holdsEach; i++) {
        const handle = await locks.acquire('bell:ping-pong', { timeoutMs: 10_000 });
        await new Promise((resolve) => setImmediate(resolve));
        await handle.release();
      }
    };
    await Promise.all([loop(a), loop(b)]);
    const perHold = (a.stats().roundTripsBy.locks + b.stats().roundTripsBy.locks - before) / (2 * holdsEach);
    // 2 per hold: the grant (behind its bell wait) and the release (with its ring). Asking first
    // and being refused adds the full plan's round trip to each re-request: about 3 per hold.
    assert.ok(perHold <= 2.4, `${perHold.toFixed(2)} lock round trips per hold`);
  });

  it('a decorated call that waits on the bell opens no business transaction while it waits', async () => {
    const KEY = 'bell:decorated';
    const waits = async (locks: LockService) => eventually(async () => locks.stats().waiting === 1, 5_000, 'a caller to wait');
    // a and b re-request the key in turn (their holds go through its bell); then a takes it and keeps
    // it. (a keeping its own last turn instead could leave b, if the scheduler gave a its turns
    // first, waiting out its budget behind that hold.)
    const turns = async (locks: LockService, holds: number) => {
      for (let i = 0; i < holds; i++) {
        const handle = await locks.acquire(KEY, { timeoutMs: 10_000 });
        await new Promise((resolve) => setImmediate(resolve));
        await handle.release();
      }
    };
    let held: LockHandle | undefined;
    // The turns are up to the scheduler: tried until b's last release rang the bell as its holder.
    for (let attempt = 0; attempt < 5 && !(held && partsOf(b).store.doorbells?.rungLately(KEY)); attempt++) {
      await held?.release();
      await Promise.all([turns(a, 8), turns(b, 6)]);
      held = await a.acquire(KEY, { timeoutMs: 10_000 });
    }
    assert.ok(partsOf(b).store.doorbells?.rungLately(KEY), "b rang the key's bell as a holder a moment ago");
    const sentBefore = dataSourceStatements.sent.length;
    const ran = jobs.run();
    // b's call waits on the bell (on the lock's own pool): its business transaction is not opened meanwhile.
    await waits(b);
    await new Promise((resolve) => setTimeout(resolve, 100));
    assert.deepEqual(dataSourceStatements.sent.slice(sentBefore), [], 'no statement on the DataSource while the call waits');
    await held!.release();
    assert.equal(await ran, 'ran');
    assert.ok(dataSourceStatements.sent.length > sentBefore, 'its business transaction ran after the grant');
  });
});
