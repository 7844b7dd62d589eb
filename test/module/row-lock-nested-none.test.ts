import 'reflect-metadata';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { TestDatabase } from '../support/test-database.js';
import { createLockApp } from '../support/lock-app.js';

/**
 * README: "Row-lock sessions ... take at most the DataSource's pool size minus one connection, so a
 * process never deadlocks on its own pool." A single call chain: runLocked (row-lock,
 * transaction 'none') whose work takes a nested runLocked (row-lock, transaction 'none') on
 * another, free key. Nobody else holds anything: the nested call must run.
 */
describe("nested row-lock runLocked with transaction 'none'", () => {
  let db: TestDatabase;
  before(async () => {
    db = await TestDatabase.create();
  });
  after(async () => {
    await db?.drop();
  });

  for (const pool of [2, 3]) {
    it(`pool ${pool}: ${pool - 1} chain(s) at once, each nesting a second key: every nested call runs`, async () => {
      const { app, locks } = await createLockApp(db.settings, { strategy: 'row-lock', janitor: false }, { poolSize: pool });
      try {
        const chains = pool - 1;
        for (let i = 0; i < chains; i++) for (const k of [`n${pool}:o${i}`, `n${pool}:i${i}`]) await locks.withLock(k, async () => undefined);
        let inside = 0;
        let allIn!: () => void;
        const gate = new Promise<void>((r) => (allIn = r));
        const t0 = performance.now();
        const outcomes = await Promise.all(
          Array.from({ length: chains }, (_, i) =>
            locks
              .runLocked(
                `n${pool}:o${i}`,
                async () => {
                  if (++inside === chains) allIn();
                  await gate;
                  return locks
                    .runLocked(`n${pool}:i${i}`, async () => 'nested ran', { transaction: 'none', timeoutMs: 1_500 })
                    .catch((e: Error) => `nested ${e.name} after ${(performance.now() - t0).toFixed(0)} ms`);
                },
                { transaction: 'none' },
              )
              .catch((e: Error) => `outer ${e.name}`),
          ),
        );
        assert.deepEqual(
          outcomes,
          Array(chains).fill('nested ran'),
          `nested row-locks on free keys: ${outcomes.join(' | ')}. The outer holds (transaction 'none' still keeps a DataSource connection) took all pool − 1 row-lock slots, and each nested call queued for a slot its own chain keeps: the process deadlocked on its own pool until the nested budget ran out`,
        );
      } finally {
        await app.close();
      }
    });
  }
});
