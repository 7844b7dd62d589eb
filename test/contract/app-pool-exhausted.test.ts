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
 * The app's own work holds every connection of its DataSource's pool. A locked call that needs one
 * (any row-lock call; a lease call's REQUIRES_NEW transaction) still gets its answer within its
 * budget (LockTimeoutError), not whenever the app lets a connection go; a lease it was granted
 * meanwhile is given back at once (other processes wait for that key), and the connection that
 * comes free after it gave up goes back to the pool, not to a runner nobody uses. A lease hold
 * itself needs no DataSource connection.
 */
contractSuite('bounded-connection-wait', "the app's DataSource pool held full by the app", { postgres: true }, (target) => {
  const TIMEOUT_MS = 500;
  // Margin: a loaded 2-core machine; the app lets its connections go only after 4 s.
  const MARGIN_MS = 1_500;
  const APP_HOLDS_MS = 4_000;
  let db: TestDatabase;
  let app: INestApplicationContext;
  let locks: LockService;
  let peerApp: INestApplicationContext;
  let peer: LockService;
  let dataSource: DataSource;

  before(async () => {
    db = await TestDatabase.forTarget(target);
    ({ app, locks } = await createLockApp(db.settings, target.options({ janitor: false })));
    ({ app: peerApp, locks: peer } = await createLockApp(db.settings, target.options({ janitor: false })));
    dataSource = app.get(DataSource);
  });
  after(async () => {
    await app?.close();
    await peerApp?.close();
    await db?.drop();
  });

  /** Runs `call` while the app holds the whole pool (let go after APP_HOLDS_MS); its outcome and how long it took. */
  async function whilePoolHeld(call: () => Promise<unknown>): Promise<{ outcome: unknown; tookMs: number }> {
    const held: QueryRunner[] = [];
    for (let i = 0; i < POOL; i++) {
      const runner = dataSource.createQueryRunner();
      await runner.connect();
      await runner.startTransaction();
      held.push(runner);
    }
    // Without a bound the call would be answered only once the app lets go.
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
      const outcome = await call().then(
        (value) => value,
        (error: unknown) => error,
      );
      return { outcome, tookMs: performance.now() - started };
    } finally {
      await letGo;
      // Every connection is free again: the app can take the whole pool at once.
      const again = await Promise.all(
        Array.from({ length: POOL }, async () => {
          const runner = dataSource.createQueryRunner();
          await runner.connect();
          return runner;
        }),
      );
      for (const runner of again) await runner.release();
    }
  }

  it(`withLock: ${target.strategy === 'row-lock' ? `LockTimeoutError within its budget (${TIMEOUT_MS} ms)` : 'granted and run (a lease hold takes no DataSource connection)'}`, async (t) => {
    const { outcome, tookMs } = await whilePoolHeld(() => locks.withLock('pool:with-lock', async () => 'ran', { timeoutMs: TIMEOUT_MS }));
    t.diagnostic(`answered after ${Math.round(tookMs)} ms: ${String(outcome)}`);
    if (target.strategy === 'row-lock') assert.ok(outcome instanceof LockTimeoutError, `a LockTimeoutError, got ${String(outcome)}`);
    else assert.equal(outcome, 'ran');
    assert.ok(tookMs < TIMEOUT_MS + MARGIN_MS, `answered after ${Math.round(tookMs)} ms`);
    assert.equal(await locks.withLock('pool:with-lock', async () => 'ran', { timeoutMs: 5_000 }), 'ran');
  });

  it(`runLocked in a new transaction: LockTimeoutError within its budget (${TIMEOUT_MS} ms), the work never runs, and the key is free at once`, async (t) => {
    let ran = false;
    let freeWhileHeld = false;
    const { outcome, tookMs } = await whilePoolHeld(async () => {
      try {
        return await locks.runLocked('pool:run-locked', () => (ran = true), { timeoutMs: TIMEOUT_MS });
      } finally {
        // Still inside the app's hold: a lease granted to the call was given back, not kept while the call waited.
        const other = await peer.tryAcquire('pool:run-locked');
        freeWhileHeld = other !== null;
        await other?.release();
      }
    });
    t.diagnostic(`answered after ${Math.round(tookMs)} ms: ${String(outcome)}`);
    assert.ok(outcome instanceof LockTimeoutError, `a LockTimeoutError, got ${String(outcome)}`);
    assert.ok(tookMs < TIMEOUT_MS + MARGIN_MS, `answered after ${Math.round(tookMs)} ms`);
    assert.equal(ran, false, 'the work ran');
    assert.ok(freeWhileHeld, 'another service got the key as soon as the call gave up, while the pool was still full');
    if (target.strategy === 'lease') {
      // The lease was granted, then given back when no connection came: its row ends FAILED; the other service's after it.
      const rows = await db.logRows('pool:run-locked');
      assert.deepEqual(
        rows.map((r) => r.status),
        ['FAILED', 'RELEASED'],
      );
    }
    assert.equal(await locks.runLocked('pool:run-locked', () => 'ran', { timeoutMs: 5_000 }), 'ran');
  });

  // onLocked 'skip': a call that cannot start in time (no connection for its transaction) is skipped, as one that waited for the lock.
  for (const timeoutMs of [TIMEOUT_MS, undefined]) {
    it(`runLocked(onLocked 'skip', ${timeoutMs === undefined ? 'default timeout' : `timeoutMs ${timeoutMs}`}): not run, resolves undefined`, async () => {
      let ran = false;
      const { outcome } = await whilePoolHeld(() =>
        locks.runLocked(`pool:skip:${timeoutMs}`, async () => void (ran = true), {
          onLocked: 'skip',
          ...(timeoutMs === undefined ? {} : { timeoutMs }),
        }),
      );
      assert.equal(ran, false, 'the work ran');
      assert.equal(outcome, undefined, `resolves undefined, got ${String(outcome)}`);
    });
  }
});
