import 'reflect-metadata';
import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { type INestApplicationContext, Injectable } from '@nestjs/common';
import { DbLockOptionsError, LockService, LockTimeoutError, WriteLock } from '../../lib/index.js';
import { createLockApp } from '../support/lock-app.js';
import { callerTrips } from '../support/round-trips.js';
import { TestDatabase } from '../support/test-database.js';
import { contractSuite } from '../support/contract-targets.js';

@Injectable()
class Job {
  constructor(readonly locks: LockService) {}
  @WriteLock('job', { maxAttempts: 2, timeoutMs: 60_000, transaction: 'none' })
  async run(): Promise<string> {
    return 'ran';
  }
}

/** "Retry N times": maxAttempts bounds the tries (each one a database round trip here) within timeoutMs. */
contractSuite('bounded-attempts', 'maxAttempts', { postgres: true }, (target) => {
  let db: TestDatabase;
  let holderApp: INestApplicationContext;
  let waiterApp: INestApplicationContext;
  let holder: LockService;
  let waiter: LockService;
  before(async () => {
    db = await TestDatabase.forTarget(target);
    ({ app: holderApp, locks: holder } = await createLockApp(db.settings, target.options({ janitor: false })));
    // A fixed pause between tries, so the count of tries is what maxAttempts says, not what time allows.
    ({ app: waiterApp, locks: waiter } = await createLockApp(
      db.settings,
      target.options({ janitor: false, retryMinDelayMs: 20, retryMaxDelayMs: 20, maxAttempts: 5 }),
      { providers: [Job] },
    ));
  });
  after(async () => {
    await holderApp?.close();
    await waiterApp?.close();
    await db?.drop();
  });

  it('stops after exactly maxAttempts tries against a held key, well before timeoutMs', async () => {
    const held = await holder.acquire('busy');
    try {
      for (const maxAttempts of [1, 3]) {
        const before = callerTrips(waiter);
        const started = performance.now();
        await assert.rejects(waiter.acquire('busy', { maxAttempts, timeoutMs: 60_000 }), LockTimeoutError);
        const trips = callerTrips(waiter) - before;
        // Each try is one or two round trips (a refused floor-shaped grant, then the full plan that
        // says why), plus at most one doorbell round trip ringing it at the end.
        assert.ok(trips >= maxAttempts && trips <= 2 * maxAttempts + 1, `${maxAttempts} tries took ${trips} round trips`);
        assert.ok(performance.now() - started < 5_000, 'gave up on tries, not on the 60 s budget');
      }
    } finally {
      await held.release();
    }
  });

  it('the module default applies to calls that do not say, and a free key is granted on the first try', async () => {
    const held = await holder.acquire('busy2');
    const started = performance.now();
    await assert.rejects(waiter.acquire('busy2', { timeoutMs: 60_000 }), LockTimeoutError);
    assert.ok(performance.now() - started < 5_000, 'the module default maxAttempts (5) ended the wait');
    await held.release();
    const lock = await waiter.acquire('busy2', { maxAttempts: 1 });
    await lock.release();
  });

  it('decorators take it too', async () => {
    const held = await holder.acquire('job');
    await assert.rejects(waiterApp.get(Job).run(), LockTimeoutError);
    await held.release();
    assert.equal(await waiterApp.get(Job).run(), 'ran');
  });

  it('is validated like every other option, before any SQL', async () => {
    const before = callerTrips(waiter);
    for (const bad of [0, -1, 1.5, NaN, '3', null]) {
      await assert.rejects(
        waiter.acquire('x', { maxAttempts: bad as number }),
        (e: unknown) => e instanceof DbLockOptionsError && /maxAttempts/.test(e.message),
      );
    }
    await assert.rejects(waiter.tryAcquire('x', { maxAttempts: 2 } as never), DbLockOptionsError);
    assert.equal(callerTrips(waiter), before);
  });
});
