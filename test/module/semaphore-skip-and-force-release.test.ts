import 'reflect-metadata';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { type INestApplicationContext, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { setTimeout as sleep } from 'node:timers/promises';
import { TestDatabase } from '../support/test-database.js';
import { createLockApp } from '../support/lock-app.js';
import { LockLostError, LockService, LockServiceRegistry, SemaphoreLimitError, type LockEvent } from '../../lib/index.js';
import { DbLockTestingModule } from '../../lib/testing/index.js';

/**
 * Each run on the database service and on the in-memory testing module:
 * - one-try callers (onLocked 'skip', timeoutMs 0) of a semaphore with room for all of them, all at
 *   once from one process: none may be skipped (a free permit must not look busy);
 * - permits evicted by forceRelease: signals abort, release()/extend() say LockLostError, a new
 *   limit is adopted at once, events and stats agree.
 */
interface Target {
  locks: LockService;
  events: LockEvent[];
  close(): Promise<void>;
}

async function onDatabase(): Promise<Target> {
  const db = await TestDatabase.create();
  const events: LockEvent[] = [];
  const { app, locks } = await createLockApp(db.settings, { janitor: false, leaseMs: 5_000, onEvent: (e) => events.push(e) });
  return {
    locks,
    events,
    close: async () => {
      await app.close();
      await db.drop();
      LockServiceRegistry.reset();
    },
  };
}

async function inMemory(): Promise<Target> {
  const events: LockEvent[] = [];
  @Module({ imports: [DbLockTestingModule.forRoot({ leaseMs: 5_000, onEvent: (e) => events.push(e) })] })
  class TestModule {}
  const app: INestApplicationContext = await NestFactory.createApplicationContext(TestModule, { logger: false });
  await app.init();
  return {
    locks: app.get(LockService),
    events,
    close: async () => {
      await app.close();
      LockServiceRegistry.reset();
    },
  };
}

for (const [where, make] of [
  ['database', onDatabase],
  ['in-memory', inMemory],
] as const) {
  describe(`semaphores (${where}): one-try permits and evicted permits`, () => {
    let t: Target;
    before(async () => {
      t = await make();
    });
    after(async () => {
      await t?.close();
    });

    for (const warm of [false, true]) {
      it(`6 skip callers at once on a semaphore of 6 (${warm ? 'key used before' : 'first use'}): all run`, async () => {
        const key = `skip-all:${warm}`;
        if (warm) await t.locks.withSemaphore(key, 6, () => undefined);
        let inside = 0;
        let most = 0;
        const outcomes = await Promise.all(
          Array.from({ length: 6 }, () =>
            t.locks.runSemaphore(
              key,
              6,
              async () => {
                most = Math.max(most, ++inside);
                await sleep(300);
                inside--;
                return 'ran';
              },
              { onLocked: 'skip', transaction: 'none' },
            ),
          ),
        );
        assert.deepEqual(outcomes, Array(6).fill('ran'), `outcomes ${JSON.stringify(outcomes)}: a caller was skipped while permits were free`);
        assert.equal(most, 6);
      });

      it(`6 one-try acquireSemaphore at once on a semaphore of 6 (${warm ? 'key used before' : 'first use'}): all granted`, async () => {
        const key = `one-try-all:${warm}`;
        if (warm) await t.locks.withSemaphore(key, 6, () => undefined);
        const outcomes = await Promise.allSettled(Array.from({ length: 6 }, () => t.locks.acquireSemaphore(key, 6, { timeoutMs: 0 })));
        const granted = outcomes.filter((o) => o.status === 'fulfilled');
        for (const o of granted) await (o as PromiseFulfilledResult<{ release(): Promise<void> }>).value.release();
        assert.equal(
          granted.length,
          6,
          `only ${granted.length} of 6 granted: ${outcomes.map((o) => (o.status === 'rejected' ? (o.reason as Error).name : 'ok')).join(', ')}`,
        );
      });
    }

    it('forceRelease of a semaphore key: both permits lose their signal, release/extend LockLostError, a new limit adopted, events/stats agree', async () => {
      const key = 'evicted';
      const before = t.locks.stats();
      const p1 = await t.locks.acquireSemaphore(key, 2);
      const p2 = await t.locks.acquireSemaphore(key, 2);
      const info = await t.locks.inspect(key);
      assert.deepEqual(
        info.holders.map((h) => h.mode),
        ['permit', 'permit'],
      );
      const evicted = await t.locks.forceRelease(key, 'test');
      assert.equal(evicted.length, 2, 'both permits evicted');
      assert.deepEqual(
        evicted.map((h) => h.mode),
        ['permit', 'permit'],
      );
      // A new limit at once: no permit is live.
      const p3 = await t.locks.acquireSemaphore(key, 5, { timeoutMs: 0 });
      assert.equal(p3.limit, 5);
      // The evicted holders hear it (the watchdog on the database, at once in memory).
      const deadline = performance.now() + 15_000;
      while (!(p1.signal.aborted && p2.signal.aborted) && performance.now() < deadline) await sleep(50);
      assert.ok(p1.signal.aborted && p2.signal.aborted, 'both evicted permits aborted their signal');
      assert.ok(p1.signal.reason instanceof LockLostError, 'signal reason LockLostError');
      await assert.rejects(p1.extend(), LockLostError, 'extend of an evicted permit');
      await assert.rejects(p2.release(), LockLostError, 'release of an evicted permit');
      await assert.rejects(p1.release(), LockLostError, 'release of an evicted permit (after extend)');
      // The old limit is refused now that p3 holds limit 5.
      await assert.rejects(t.locks.acquireSemaphore(key, 2, { timeoutMs: 0 }), SemaphoreLimitError);
      await p3.release();
      const after = t.locks.stats();
      assert.equal(after.acquired - before.acquired, 3, 'acquired: 3 permits');
      assert.equal(after.lost - before.lost, 2, 'lost: the 2 evicted permits');
      assert.equal(after.forceReleased - before.forceReleased, 2, 'forceReleased: 2 holders');
      assert.equal(after.held, 0, 'nothing held');
      const lost = t.events.filter((e) => e.type === 'lost' && e.keys.includes(key));
      assert.equal(lost.length, 2, `lost events: ${JSON.stringify(lost.map((e) => e.type))}`);
      for (const e of t.events.filter((e) => e.keys.includes(key))) assert.equal(e.mode, 'read', `event ${e.type} reports mode ${e.mode}`);
    });
  });
}
