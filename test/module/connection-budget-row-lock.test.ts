import 'reflect-metadata';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { DataSource } from 'typeorm';
import { createLockApp } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';
import { mysqlLogOf } from '../support/lock-internals.js';
import { rowLockLoad } from '../support/row-lock-load.js';
import { sessionsLeft, type Threads, watchSessions } from '../support/session-count.js';

/**
 * README "Connections per process", row-lock row: the DataSource's connections used by row-lock
 * holders and callers waiting in the database are at most the pool's size − 1; the library's own
 * at most poolSize (here 2 and 3: no doorbells / one doorbell). Row-lock only load (holders,
 * waiters, nested row-locks joining, maxHoldMs cuts, one-try callers), sampled in PROCESSLIST.
 */
const DS_POOL = 4;
const RUN_MS = 4_000;

describe('row-lock DataSource budget and small library pools', () => {
  let db: TestDatabase;
  before(async () => {
    db = await TestDatabase.create();
  });
  after(async () => {
    await db?.drop();
  });

  for (const poolSize of [2, 3])
    it(`row-lock load: DataSource sessions ≤ ${DS_POOL - 1}, library ≤ ${poolSize}, none after close`, async (t) => {
      const { app, locks } = await createLockApp(
        db.settings,
        { poolSize, strategy: 'row-lock', maxHoldMs: 60, leaseMs: 1_000, janitor: { intervalMs: 150, logRetentionMs: 0, idleKeyMs: 0 } },
        { poolSize: DS_POOL },
      );
      const library = mysqlLogOf(locks).pool as unknown as { pool: Threads; reserved: Threads };
      void app.get(DataSource);
      const load = rowLockLoad(locks, RUN_MS, async (c) => {
        await locks.manager.query('SELECT 1');
        if (c % 4 === 1) await locks.runLocked(`r:${(c + 1) % 3}:inner`, () => locks.manager.query('SELECT 2'), { timeoutMs: 100 });
        await sleep(Math.floor(Math.random() * (c % 5 === 0 ? 100 : 10)));
      });
      const business = (app.get(DataSource).driver as unknown as { pool: Threads }).pool;
      const { mostDs, mostLib, worst } = await watchSessions(db, library, load.done, business);
      await load.finished;
      await app.close();
      const left = await sessionsLeft(db);
      t.diagnostic(`most DataSource sessions ${mostDs}, most library ${mostLib}; errors ${JSON.stringify([...load.kinds])}`);
      assert.deepEqual(load.raw.slice(0, 5), [], `errors that are not DbLockErrors reached callers (${load.raw.length})`);
      assert.ok(mostLib <= poolSize, `${mostLib} library sessions > poolSize ${poolSize}`);
      assert.ok(mostDs <= DS_POOL - 1, `${mostDs} DataSource sessions > its pool size − 1 (${DS_POOL - 1}): ${JSON.stringify(worst)}`);
      assert.deepEqual(left, [], 'no session left 300 ms after app.close()');
    });
});
