import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import type { INestApplicationContext } from '@nestjs/common';
import { DataSource, type QueryRunner } from 'typeorm';
import { LockTimeoutError, type LockService } from '../../lib/index.js';
import { TestDatabase } from '../support/test-database.js';
import { createLockApp } from '../support/lock-app.js';
import { contractSuite } from '../support/contract-targets.js';

const POOL = 10; // the test DataSource's pool (test/support/lock-app.ts)

/**
 * A row-lock is taken on a connection of the app's DataSource. When the app's own work holds every
 * connection of that pool, a caller must still get its answer within its budget (LockTimeoutError),
 * not whenever the app lets a connection go; and the connection that comes free after it gave up
 * goes back to the pool, not to a runner nobody uses.
 */
contractSuite('holder-connection', "row-lock: the app's pool exhausted by the app", () => {
  const TIMEOUT_MS = 500;
  // Margin: a loaded 2-core machine; the app lets its connections go only after 4 s.
  const MARGIN_MS = 1_500;
  const APP_HOLDS_MS = 4_000;
  let db: TestDatabase;
  let app: INestApplicationContext;
  let locks: LockService;
  let dataSource: DataSource;

  before(async () => {
    db = await TestDatabase.create();
    ({ app, locks } = await createLockApp(db.settings, { strategy: 'row-lock', janitor: false }));
    dataSource = app.get(DataSource);
  });
  after(async () => {
    await app?.close();
    await db?.drop();
  });

  it(`times out within its budget (${TIMEOUT_MS} ms), and the connection it waited for goes back to the pool`, async (t) => {
    const held: QueryRunner[] = [];
    for (let i = 0; i < POOL; i++) {
      const runner = dataSource.createQueryRunner();
      await runner.connect();
      await runner.startTransaction();
      held.push(runner);
    }
    // The app lets its connections go after APP_HOLDS_MS: without a bound the caller would be granted then.
    const letGo = sleep(APP_HOLDS_MS).then(() =>
      Promise.all(
        held.map(async (runner) => {
          await runner.rollbackTransaction();
          await runner.release();
        }),
      ),
    );
    try {
      const started = performance.now();
      const outcome = await locks
        .withLock('pool:exhausted', async () => 'ran', { timeoutMs: TIMEOUT_MS })
        .then(
          (value) => value,
          (error: unknown) => error,
        );
      const tookMs = performance.now() - started;
      t.diagnostic(`answered after ${Math.round(tookMs)} ms: ${String(outcome)}`);
      assert.ok(outcome instanceof LockTimeoutError, `a LockTimeoutError, got ${String(outcome)}`);
      assert.ok(tookMs < TIMEOUT_MS + MARGIN_MS, `answered after ${Math.round(tookMs)} ms`);
    } finally {
      await letGo;
    }
    // Every connection is free again: the app can take the whole pool at once, and the lock works.
    const again = await Promise.all(
      Array.from({ length: POOL }, async () => {
        const runner = dataSource.createQueryRunner();
        await runner.connect();
        return runner;
      }),
    );
    for (const runner of again) await runner.release();
    assert.equal(await locks.withLock('pool:exhausted', async () => 'ran', { timeoutMs: 5_000 }), 'ran');
  });
});
