import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import type { INestApplicationContext } from '@nestjs/common';
import { DataSource, type QueryRunner } from 'typeorm';
import type { LockService } from '../../lib/index.js';
import { TestDatabase } from '../support/test-database.js';
import { createLockApp } from '../support/lock-app.js';
import { contractSuite } from '../support/contract-targets.js';

const POOL = 10; // the test DataSource's pool (test/support/lock-app.ts)

/**
 * onLocked 'skip' when the lock cannot be had within timeoutMs because the app's own work holds
 * every connection of the DataSource (README: timeoutMs covers the lock "and the DataSource
 * connection its transaction needs"; runLocked: "'skip': if the lock cannot be had within
 * timeoutMs, fn is not run and the call resolves undefined"). The same call must resolve
 * undefined whatever the strategy, never reject with the LockTimeoutError that 'throw' gives.
 */
contractSuite('bounded-connection-wait', "onLocked 'skip' while the app's DataSource pool is held full", (target) => {
  const TIMEOUT_MS = 500;
  // The app lets its connections go after 3 s: far past the budget (+ 250 ms connect grace) on a loaded 2-core machine.
  const APP_HOLDS_MS = 3_000;
  let db: TestDatabase;
  let app: INestApplicationContext;
  let locks: LockService;
  let dataSource: DataSource;

  before(async () => {
    db = await TestDatabase.create();
    ({ app, locks } = await createLockApp(db.settings, target.options({ janitor: false })));
    dataSource = app.get(DataSource);
  });
  after(async () => {
    await app?.close();
    await db?.drop();
  });

  async function whilePoolHeld(call: () => Promise<unknown>): Promise<unknown> {
    const held: QueryRunner[] = [];
    for (let i = 0; i < POOL; i++) {
      const runner = dataSource.createQueryRunner();
      await runner.connect();
      await runner.startTransaction();
      held.push(runner);
    }
    const letGo = sleep(APP_HOLDS_MS).then(() =>
      Promise.all(
        held.map(async (runner) => {
          await runner.rollbackTransaction();
          await runner.release();
        }),
      ),
    );
    try {
      return await call().then(
        (value) => ({ resolved: value }),
        (error: unknown) => ({ rejected: error }),
      );
    } finally {
      await letGo;
    }
  }

  it(`runLocked(onLocked 'skip', timeoutMs ${TIMEOUT_MS}): not run, resolves undefined`, async () => {
    let ran = false;
    const outcome = await whilePoolHeld(() =>
      locks.runLocked('hunt:skip-pool', async () => void (ran = true), { onLocked: 'skip', timeoutMs: TIMEOUT_MS }),
    );
    assert.equal(ran, false, 'the work ran');
    assert.deepEqual(outcome, { resolved: undefined }, `resolves undefined, got ${String((outcome as { rejected?: unknown }).rejected)}`);
  });

  it("runLocked(onLocked 'skip', default timeout: one try): not run, resolves undefined", async () => {
    let ran = false;
    const outcome = await whilePoolHeld(() => locks.runLocked('hunt:skip-pool-0', async () => void (ran = true), { onLocked: 'skip' }));
    assert.equal(ran, false, 'the work ran');
    assert.deepEqual(outcome, { resolved: undefined }, `resolves undefined, got ${String((outcome as { rejected?: unknown }).rejected)}`);
  });
});
