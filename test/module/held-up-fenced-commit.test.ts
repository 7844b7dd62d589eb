import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import type mysql from 'mysql2/promise';
import { DbLockError, type LockService } from '../../lib/index.js';
import { ANSWER_BOUND_MS } from '../../lib/store/mysql/mysql-lock-log.js';
import { createLockApp, eventually } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';
import { forEachStrategy } from '../support/strategies.js';
import { bounded } from '../support/settled.js';

/**
 * README (Liveness): "No lock statement waits for its answer longer than 15 s". The fenced commit
 * of a runLocked call (lease: the end-and-commit CALL; row-lock: the record-and-commit CALL) is a
 * lock statement too: when the server does not answer it (here: the lock log table is locked by
 * another session for 20 s), the caller must get a typed error after about ANSWER_BOUND_MS, not
 * wait as long as the server does.
 */

const HELD_UP_MS = ANSWER_BOUND_MS + 6_000;

forEachStrategy((strategy) => {
  describe(`a fenced commit whose answer does not come (${strategy})`, () => {
    let db: TestDatabase;
    let app: INestApplicationContext;
    let locks: LockService;
    let locker: mysql.Connection;

    before(async () => {
      db = await TestDatabase.create();
      ({ app, locks } = await createLockApp(db.settings, { strategy, janitor: false }));
      locker = await db.session();
    });
    after(async () => {
      await locker?.query('UNLOCK TABLES').catch(() => undefined);
      await app?.close();
      await db?.drop();
    });

    it(`runLocked settles within ANSWER_BOUND_MS (${ANSWER_BOUND_MS} ms) + 2 s of its commit being sent, typed`, async (t) => {
      const key = 'fence-no-answer';
      await (await locks.acquire(key)).release();
      let lockedAt = 0;
      const settledAt = { at: 0 };
      const call = locks
        .runLocked(key, async () => {
          await bounded(locker.query('LOCK TABLES db_lock_log WRITE'), 3_000, 'LOCK TABLES');
          lockedAt = performance.now();
        })
        .then(
          () => undefined,
          (e: unknown) => e,
        )
        .finally(() => (settledAt.at = performance.now()));
      await eventually(() => lockedAt > 0, 5_000, 'the table locked inside the work');
      // Held up on the server for longer than the answer bound; the caller must have heard by then.
      while (settledAt.at === 0 && performance.now() - lockedAt < HELD_UP_MS) await new Promise((r) => setTimeout(r, 100));
      await locker.query('UNLOCK TABLES');
      const error = await bounded(call, 20_000, 'runLocked after the unlock');
      const tookMs = settledAt.at - lockedAt;
      t.diagnostic(`runLocked settled ${Math.round(tookMs)} ms after its commit was held up: ${String(error)}`);
      assert.ok(
        tookMs < ANSWER_BOUND_MS + 2_000,
        `runLocked waited ${Math.round(tookMs)} ms for its fenced commit's answer (the server held it up ${HELD_UP_MS} ms); ` +
          `no lock statement should wait longer than ${ANSWER_BOUND_MS} ms`,
      );
      assert.ok(error instanceof DbLockError, `typed: ${String(error)}`);
    });
  });
});
