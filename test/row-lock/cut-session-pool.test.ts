import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import type { INestApplicationContext } from '@nestjs/common';
import { DataSource, type QueryRunner } from 'typeorm';
import { LockLostError, type LockService } from '../../lib/index.js';
import { TestDatabase } from '../support/test-database.js';
import { createLockApp } from '../support/lock-app.js';
import { contractSuite } from '../support/contract-targets.js';

/**
 * A row-lock hold given up at maxHoldMs is abandoned: its connection is closed under the work
 * (cutSession) and must never serve anyone again. The app's own statement queued for a
 * connection of its DataSource meanwhile must get a live connection (a new one), not the one the
 * library has just closed: it has nothing to do with the lock, and must not fail because of it.
 */
contractSuite(
  'holder-connection',
  'row-lock: a hold cut at maxHoldMs while the app waits for a DataSource connection',
  { postgres: true },
  (target) => {
    const POOL = 2; // row-lock sessions take at most POOL - 1 = 1 connection; the app holds the other
    const MAX_HOLD_MS = 300;
    let db: TestDatabase;
    let app: INestApplicationContext;
    let locks: LockService;
    let dataSource: DataSource;
    before(async () => {
      db = await TestDatabase.forTarget(target);
      const options = { strategy: 'row-lock', maxHoldMs: MAX_HOLD_MS, janitor: false, escapedWrites: 'ignore' } as const;
      ({ app, locks } = await createLockApp(db.settings, options, { poolSize: POOL }));
      dataSource = app.get(DataSource);
    });
    after(async () => {
      await app?.close();
      await db?.drop();
    });

    it("the app's queued statement runs on a live connection, not on the cut one", async (t) => {
      let appRunner: QueryRunner | undefined;
      for (let round = 0; round < 3; round++) {
        appRunner = dataSource.createQueryRunner();
        await appRunner.connect(); // the app's own work holds one connection of two
        const hold = locks
          .runLocked(`cut-${round}`, async () => {
            await sleep(MAX_HOLD_MS + 400); // past maxHoldMs: the hold is cut meanwhile
          })
          .then(
            () => 'committed',
            (error: unknown) => error,
          );
        await sleep(100); // the hold has the other connection now
        // The app's own statement: no connection is free, it queues in the DataSource's pool.
        const queued = dataSource.query('SELECT 1 AS ok').then(
          (rows: { ok: number }[]) => rows[0]!.ok,
          (error: unknown) => error,
        );
        const outcome = await Promise.race([queued, sleep(5_000).then(() => 'still waiting after 5 s')]);
        t.diagnostic(`round ${round}: the app's statement: ${String(outcome)}`);
        assert.ok((await hold) instanceof LockLostError, 'the hold was lost at maxHoldMs');
        await appRunner.release();
        // Margin: the cut connection frees at MAX_HOLD_MS (300 ms); 5 s on a loaded machine.
        assert.equal(outcome, 1, `the app's statement failed: ${String(outcome)}`);
      }
    });
  },
);
