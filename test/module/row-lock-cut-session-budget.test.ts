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
 * holders and callers waiting in the database are at most the pool's size − 1. Here maxHoldMs
 * (60 ms) cuts holders while their work's statement (SELECT SLEEP(0.4)) is in flight: the server
 * session goes on until that statement ends, but its slot is handed to the next caller at once,
 * which opens another connection. PROCESSLIST then shows more sessions than the bound.
 */
const DS_POOL = 3;
const RUN_MS = 4_000;

describe('row-lock DataSource budget when maxHoldMs cuts a statement in flight', () => {
  let db: TestDatabase;
  before(async () => {
    db = await TestDatabase.create();
  });
  after(async () => {
    await db?.drop();
  });

  for (const poolSize of [3])
    it(`maxHoldMs cuts holders mid-statement: DataSource sessions on the server stay ≤ pool size − 1 (${DS_POOL - 1})`, async (t) => {
      const { app, locks } = await createLockApp(
        db.settings,
        { poolSize, strategy: 'row-lock', maxHoldMs: 60, leaseMs: 1_000, janitor: { intervalMs: 150, logRetentionMs: 0, idleKeyMs: 0 } },
        { poolSize: DS_POOL },
      );
      const library = mysqlLogOf(locks).pool as unknown as { pool: Threads; reserved: Threads };
      void app.get(DataSource);
      const load = rowLockLoad(locks, RUN_MS, async (c) => {
        await locks.manager.query('SELECT 1');
        await locks.manager.query('SELECT SLEEP(0.4)');
        await sleep(Math.floor(Math.random() * (c % 5 === 0 ? 100 : 10)));
      });
      const { mostDs, mostLib, worst } = await watchSessions(db, library, load.done);
      await load.finished;
      await app.close();
      const left = await sessionsLeft(db);
      t.diagnostic(`most DataSource sessions ${mostDs}, most library ${mostLib}; errors ${JSON.stringify([...load.kinds])}`);
      assert.deepEqual(load.raw.slice(0, 5), [], `errors that are not DbLockErrors reached callers (${load.raw.length})`);
      assert.ok(mostLib <= poolSize, `${mostLib} library sessions > poolSize ${poolSize}`);
      assert.ok(
        mostDs <= DS_POOL - 1,
        `${mostDs} DataSource sessions on the server > the documented bound for row-lock holders and waiters, its pool size − 1 (${DS_POOL - 1}): cut holders' sessions still run their statement (and hold their row locks) while new callers got their slots: ${JSON.stringify(worst)}`,
      );
      assert.deepEqual(left, [], 'no session left 300 ms after app.close()');
    });
});
