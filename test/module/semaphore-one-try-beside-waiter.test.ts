import 'reflect-metadata';
import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import { TestDatabase } from '../support/test-database.js';
import { createLockApp, eventually } from '../support/lock-app.js';
import type { LockService } from '../../lib/index.js';
import { contractSuite } from '../support/contract-targets.js';

/**
 * "timeoutMs: 0 one try" / onLocked 'skip' (one try): a permit caller of a semaphore with free
 * permits must be granted, even while another caller of its process waits (queued) for the key.
 */
contractSuite('semaphore-calls', 'semaphores: one try (timeoutMs 0, skip) beside a local waiter', { postgres: true }, (target) => {
  let db: TestDatabase;
  let a: INestApplicationContext;
  let b: INestApplicationContext;
  let la: LockService;
  let lb: LockService;

  before(async () => {
    db = await TestDatabase.forTarget(target);
    ({ app: a, locks: la } = await createLockApp(
      db.settings,
      target.options({ janitor: false, leaseMs: 5_000, retryMinDelayMs: 400, retryMaxDelayMs: 400 }),
    ));
    ({ app: b, locks: lb } = await createLockApp(db.settings, target.options({ janitor: false, leaseMs: 5_000 })));
  });
  after(async () => {
    await a?.close();
    await b?.close();
    await db?.drop();
  });

  for (const how of ['timeoutMs: 0', "onLocked: 'skip'"] as const) {
    it(`${how}: 3 permits free, one local caller waiting -> granted`, async () => {
      const key = `one-try:${how}`;
      const held = [await lb.acquireSemaphore(key, 3), await lb.acquireSemaphore(key, 3), await lb.acquireSemaphore(key, 3)];
      const waiter = la.acquireSemaphore(key, 3, { timeoutMs: 8_000 });
      await eventually(() => la.stats().waiting === 1, 2_000, 'a waits');
      await new Promise((r) => setTimeout(r, 50)); // its first try refused; it pauses 400 ms
      for (const p of held) await p.release();
      // All 3 permits free now; the waiter takes one at its next try, 2 stay free.
      let outcome: unknown;
      if (how === 'timeoutMs: 0') {
        outcome = await la.acquireSemaphore(key, 3, { timeoutMs: 0 }).then(
          async (p) => {
            await p.release();
            return 'granted';
          },
          (e: unknown) => e,
        );
      } else {
        outcome = await la.runSemaphore(key, 3, () => 'ran', { onLocked: 'skip', transaction: 'none' });
        if (outcome === 'ran') outcome = 'granted';
      }
      const first = await waiter;
      const rows = await db.logRows(key);
      await first.release();
      assert.equal(outcome, 'granted', `got ${String(outcome)}; log rows: ${rows.length} (3 released + the waiter's)`);
    });
  }
});
