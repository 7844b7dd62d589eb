import 'reflect-metadata';
import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import type { LockHandle } from '../../lib/index.js';
import { createLockApp } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';
import { contractSuite } from '../support/contract-targets.js';

/**
 * maxHoldMs (README options): "a hold longer than this is given up (its signal aborts; a row-lock's
 * transaction is rolled back)". A row-lock joined into a lease call's fenced transaction, held past maxHoldMs.
 * The joined row-lock is the target's strategy; the outer call is a lease call on both servers.
 */
contractSuite('holder-connection', 'maxHoldMs on a row-lock joined into a lease fenced transaction', { postgres: true }, (target) => {
  let db: TestDatabase;
  before(async () => {
    db = await TestDatabase.forTarget(target);
  });
  after(async () => {
    await db?.drop();
  });

  it('the joined row-lock is given up at maxHoldMs: its signal aborts and another process gets the key', { timeout: 30_000 }, async () => {
    // The outer call must be a lease call (its fenced transaction is what the row-lock joins).
    const a = await createLockApp(db.settings, { janitor: false, maxHoldMs: 500, strategy: 'lease' });
    const b = await createLockApp(db.settings, target.options({ janitor: false }));
    try {
      let inner: LockHandle | undefined;
      let innerAbortedAt = NaN;
      const t0 = performance.now();
      const call = a.locks
        .runLocked('mh-outer', () =>
          a.locks.runLocked(
            'mh-joined',
            async (h) => {
              inner = h;
              h.signal.addEventListener('abort', () => (innerAbortedAt = performance.now() - t0));
              await new Promise((r) => setTimeout(r, 2_500));
            },
            { strategy: target.strategy },
          ),
        )
        .then(
          () => 'resolved',
          (e: unknown) => (e as Error).name,
        );
      await new Promise((r) => setTimeout(r, 100));
      const got = await b.locks.acquire('mh-joined', { timeoutMs: 5_000 });
      const gotAt = performance.now() - t0;
      await got.release();
      const outcome = await call;
      console.log(
        `# ${db.type}: other got the key at ${Math.round(gotAt)} ms; inner signal aborted at ${Math.round(innerAbortedAt)} ms (${inner?.signal.aborted}); call ${outcome}`,
      );
      assert.deepEqual(
        { gotBefore1500: gotAt < 1_500, innerAbortedBefore1500: innerAbortedAt < 1_500, outcome },
        { gotBefore1500: true, innerAbortedBefore1500: true, outcome: 'LockLostError' },
      );
    } finally {
      await a.app.close();
      await b.app.close();
    }
  });
});
