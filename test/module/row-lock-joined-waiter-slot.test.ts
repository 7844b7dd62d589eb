import 'reflect-metadata';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { DataSource } from 'typeorm';
import { TestDatabase } from '../support/test-database.js';
import { createLockApp } from '../support/lock-app.js';

/**
 * README (Strategies: Connections): "Row-lock sessions (holders and callers waiting in the database)
 * take at most the DataSource's pool size minus one connection, so a process never deadlocks on its
 * own pool." and the table: a row-lock holder/waiter "one per holder and per caller waiting in the
 * database, at most the pool's size − 1".
 *
 * A row-lock holder of 'k' whose work needs one more DataSource connection (a plain query) for a
 * moment; beside it a lease-fenced call (transaction 'requires-new') on another key whose work
 * takes a nested row-lock on 'k' (it joins the fenced transaction and waits in the database on
 * that transaction's connection). The joined waiter is a caller waiting in the database that the
 * cap does not count: with it, the holder's one extra query finds no connection, and the two wait
 * for each other until the joined call's budget ends.
 */
describe('a joined row-lock waiter beside a row-lock holder that needs a second connection', () => {
  let db: TestDatabase;
  before(async () => {
    db = await TestDatabase.create();
  });
  after(async () => {
    await db?.drop();
  });

  for (const pool of [2, 3]) {
    it(
      `pool ${pool}: the holder's work finishes in about its own time and the nested row-lock is granted after it`,
      { todo: 'open question: joined row-lock waits are not counted against the row-lock connection cap (see docs/notes/open-defects.md)' },
      async () => {
        const { app, locks } = await createLockApp(db.settings, { janitor: false }, { poolSize: pool });
        try {
          const ds = app.get(DataSource);
          const k = `jk${pool}`;
          for (const key of [k, `${k}:o1`, `${k}:o2`]) await locks.withLock(key, async () => undefined, { strategy: 'row-lock' });
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
          // the fenced lease calls beside it (pool - 1 of them: one per connection the cap leaves free of row-lock sessions)
          const fenced = Array.from({ length: pool - 1 }, (_, i) =>
            locks
              .runLocked(`${k}:o${i + 1}`, () => locks.runLocked(k, async () => 'nested ran', { strategy: 'row-lock', timeoutMs: 3_000 }), {
                strategy: 'lease',
                timeoutMs: 3_000,
              })
              .catch((e: Error) => `fenced ${e.name} after ${(performance.now() - t0).toFixed(0)} ms`),
          );
          const results = await Promise.all([holder, ...fenced]);
          assert.deepEqual(
            results,
            ['holder done', ...Array(pool - 1).fill('nested ran')],
            `results: ${results.join(' | ')}; the holder's work (150 ms + one query) finished after ${holderDoneAt.toFixed(0)} ms. ` +
              `The joined row-lock waiters sat in the database on connections the pool − 1 cap does not count, so the holder's extra query waited for a connection they keep: a deadlock on the process's own pool, broken only by their timeoutMs`,
          );
          assert.ok(holderDoneAt < 1_500, `the holder's work took ${holderDoneAt.toFixed(0)} ms (expected about 150 ms)`);
        } finally {
          await app.close();
        }
      },
    );
  }
});
