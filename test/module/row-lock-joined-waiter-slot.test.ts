import 'reflect-metadata';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { DataSource } from 'typeorm';
import { LockTimeoutError } from '../../lib/index.js';
import { TestDatabase } from '../support/test-database.js';
import { createLockApp } from '../support/lock-app.js';

/**
 * README (Strategies: Connections): the pool's size − 1 bound counts row-lock sessions, the
 * connections the row-lock strategy opens for its holders and waiters. A fenced call's transaction
 * (lease, 'requires-new') holds a DataSource connection for the whole call, as any transaction of
 * the app would, and a row-lock nested inside it waits on that connection: there is no connection
 * to count, and refusing the nested call would refuse work the pool can serve.
 *
 * A row-lock holder of 'k' whose work needs one more DataSource connection for a moment; beside
 * it, lease-fenced calls on other keys whose work takes a nested row-lock on 'k'. With as many
 * fenced calls as the pool has connections left, the holder's extra query finds none: the app's
 * pool is full, and the two wait for each other as any two transactions of the app would. The
 * nested call's budget ends that wait with LockTimeoutError, its fenced call rolls back and frees
 * its connection, and the holder then finishes. With one connection to spare the holder finishes in
 * its own time and the nested calls are granted after it (the sizing the README gives).
 */
describe('a joined row-lock waiter beside a row-lock holder that needs a second connection', () => {
  let db: TestDatabase;
  before(async () => {
    db = await TestDatabase.create();
  });
  after(async () => {
    await db?.drop();
  });

  const NESTED_TIMEOUT_MS = 1_000;

  /** The holder's result and when its work finished, and each fenced call's result. */
  async function run(pool: number, fencedCalls: number, tag: string): Promise<{ holder: string; holderDoneAt: number; fenced: string[] }> {
    const { app, locks } = await createLockApp(db.settings, { janitor: false }, { poolSize: pool });
    try {
      const ds = app.get(DataSource);
      const k = `jk-${tag}`;
      const outerKeys = Array.from({ length: fencedCalls }, (_, i) => `${k}:o${i + 1}`);
      for (const key of [k, ...outerKeys]) await locks.withLock(key, async () => undefined, { strategy: 'row-lock' });
      let holding!: () => void;
      const holds = new Promise<void>((r) => (holding = r));
      const t0 = performance.now();
      let holderDoneAt = 0;
      const holder = locks
        .withLock(
          k,
          async () => {
            holding();
            await new Promise((r) => setTimeout(r, 150));
            await ds.query('SELECT 1'); // the work needs a second connection for a moment
            holderDoneAt = performance.now() - t0;
            return 'holder done';
          },
          { strategy: 'row-lock' },
        )
        .catch((e: Error) => `holder ${e.name}`);
      await holds;
      const fenced = outerKeys.map((outer) =>
        locks
          .runLocked(outer, () => locks.runLocked(k, async () => 'nested ran', { strategy: 'row-lock', timeoutMs: NESTED_TIMEOUT_MS }), {
            strategy: 'lease',
            timeoutMs: 3_000,
          })
          .catch((e: Error) => (e instanceof LockTimeoutError ? 'nested timed out' : `fenced ${e.name}: ${e.message}`)),
      );
      const [holderResult, ...fencedResults] = await Promise.all([holder, ...fenced]);
      return { holder: holderResult!, holderDoneAt, fenced: fencedResults };
    } finally {
      await app.close();
    }
  }

  for (const pool of [2, 3]) {
    it(`pool ${pool}, fenced calls holding every other connection: the nested budget ends the wait with LockTimeoutError, then the holder finishes`, async () => {
      const { holder, holderDoneAt, fenced } = await run(pool, pool - 1, `full${pool}`);
      assert.equal(holder, 'holder done');
      // At least one nested call waited out its budget (the pool was full); none failed otherwise.
      assert.ok(fenced.includes('nested timed out'), `fenced calls: ${fenced.join(' | ')}`);
      for (const result of fenced) assert.ok(result === 'nested timed out' || result === 'nested ran', `fenced calls: ${fenced.join(' | ')}`);
      // The holder's extra query waited for a connection until a nested budget ended (margin: 150 ms
      // below the budget, for timer and scheduling slack), and not long past it (5 s: no hang).
      assert.ok(holderDoneAt >= NESTED_TIMEOUT_MS - 150, `the holder finished after ${holderDoneAt.toFixed(0)} ms: it did not wait for a connection`);
      assert.ok(holderDoneAt < NESTED_TIMEOUT_MS + 5_000, `the holder finished after ${holderDoneAt.toFixed(0)} ms`);
    });
  }

  it('control, one connection to spare: the holder finishes in its own time and the nested calls are granted after it', async () => {
    const { holder, holderDoneAt, fenced } = await run(3, 1, 'spare');
    assert.equal(holder, 'holder done');
    assert.deepEqual(fenced, ['nested ran']);
    // 150 ms of work plus one query; 900 ms of margin for a loaded machine, still below the nested budget.
    assert.ok(holderDoneAt < NESTED_TIMEOUT_MS, `the holder took ${holderDoneAt.toFixed(0)} ms (expected about 150 ms)`);
  });
});
