import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import { DbLockError, type LockService } from '../../lib/index.js';
import { ANSWER_BOUND_MS } from '../../lib/store/answer-bound.js';
import { createLockApp, eventually } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';
import { pgServerUrl, pgTestsRun } from '../support/pg-test-database.js';
import { rawSession, type RawSession } from '../support/raw-session.js';
import { forEachStrategy } from '../support/strategies.js';
import { bounded, describeError } from '../support/settled.js';

/**
 * README (Liveness): "No lock statement waits for its answer longer than 15 s". The fenced commit
 * of a runLocked call (lease: the end-and-commit batch; row-lock: the audit row and COMMIT) is a
 * lock statement too: when the server does not answer it, the caller must get a typed error after
 * about ANSWER_BOUND_MS, not wait as long as the server does. Here another session holds
 * db_lock_log in ACCESS EXCLUSIVE mode for longer than the bound: the lease's UPDATE of its log
 * row and the row-lock's audit INSERT (which needs only ROW EXCLUSIVE) both wait on it, and a
 * business session has no lock_timeout of the library's. As the MariaDB file with LOCK TABLES.
 */

const HELD_UP_MS = ANSWER_BOUND_MS + 6_000;
/** Slack past the bound for a loaded machine (the MariaDB file's margin). */
const MARGIN_MS = 2_000;
const skip = (await pgTestsRun()) ? false : 'no PostgreSQL server';

forEachStrategy((strategy) => {
  describe(`a fenced commit whose answer does not come, on PostgreSQL (${strategy})`, { skip }, () => {
    let db: TestDatabase;
    let app: INestApplicationContext;
    let locks: LockService;
    let blocker: RawSession;

    before(async () => {
      db = await TestDatabase.create('dblock', { server: pgServerUrl() });
      ({ app, locks } = await createLockApp(db.settings, { strategy, janitor: false }));
      blocker = await rawSession(db.settings);
    });
    after(async () => {
      await blocker?.rollback().catch(() => undefined);
      await blocker?.end().catch(() => undefined);
      await app?.close();
      await db?.drop();
    });

    it(
      `runLocked settles within ANSWER_BOUND_MS (${ANSWER_BOUND_MS} ms) + ${MARGIN_MS} ms of its commit being sent, typed`,
      { timeout: 60_000 },
      async (t) => {
        const key = 'fence-no-answer';
        // The key row exists first, so the take inside the call only meets db_lock, never the held table.
        await (await locks.acquire(key)).release();
        let lockedAt = 0;
        const settledAt = { at: 0 };
        const call = locks
          .runLocked(key, async () => {
            // Taken once the grant is through: the fenced commit is the first statement to wait on it.
            await bounded(blocker.begin(), 3_000, 'BEGIN');
            await bounded(blocker.query('LOCK TABLE db_lock_log IN ACCESS EXCLUSIVE MODE'), 3_000, 'LOCK TABLE');
            lockedAt = performance.now();
          })
          .then(
            () => undefined,
            (e: unknown) => e,
          )
          .finally(() => (settledAt.at = performance.now()));
        await eventually(() => lockedAt > 0, 5_000, 'the table locked inside the work');
        // A commit that waits on the table shows in the server's activity: proof the hold-up is real.
        const waiting = await bounded(
          eventually(async () => settledAt.at > 0 || (await db.lockWaits()) > 0, 5_000, 'the fenced commit waiting on db_lock_log').then(
            () => settledAt.at === 0,
            () => false,
          ),
          10_000,
          'the lock wait seen',
        );
        // Held up on the server for longer than the answer bound; the caller must have heard by then.
        while (settledAt.at === 0 && performance.now() - lockedAt < HELD_UP_MS) await new Promise((r) => setTimeout(r, 100));
        const heldMs = performance.now() - lockedAt;
        await blocker.rollback();
        const error = await bounded(call, 20_000, 'runLocked after the unlock');
        const tookMs = settledAt.at - lockedAt;
        t.diagnostic(
          `commit seen waiting: ${waiting}; runLocked settled ${Math.round(tookMs)} ms after its commit was held up ` +
            `(table held ${Math.round(heldMs)} ms): ${error === undefined ? 'committed' : describeError(error)}`,
        );
        assert.ok(waiting, 'the fenced commit was seen waiting on the held table');
        assert.ok(
          tookMs < ANSWER_BOUND_MS + MARGIN_MS,
          `runLocked waited ${Math.round(tookMs)} ms for its fenced commit's answer (the server held it up ${Math.round(heldMs)} ms, ` +
            `it settled with ${error === undefined ? 'success' : describeError(error)}); no lock statement should wait longer than ${ANSWER_BOUND_MS} ms`,
        );
        assert.ok(error instanceof DbLockError, `typed: ${describeError(error)}`);
      },
    );
  });
});
