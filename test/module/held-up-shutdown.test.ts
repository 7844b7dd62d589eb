import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import type mysql from 'mysql2/promise';
import { ANSWER_BOUND_MS } from '../../lib/store/mysql/mysql-lock-log.js';
import { createLockApp, eventually } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';

/**
 * app.close() when the server does not answer the library's last statement, the delete of this
 * process's process-lease row (here: db_lock_process locked by another session for longer than the
 * answer bound). README: "No lock statement waits for its answer longer than 15 s";
 * docs/architecture.md: "Every round trip on the library's own connections has a client deadline
 * ... anything sent without one ... waits at most the answer bound, 15 s". Shutdown must therefore
 * finish within about ANSWER_BOUND_MS, not wait as long as the server holds the statement up.
 */

const HELD_UP_MS = ANSWER_BOUND_MS + 6_000;

describe('app.close() whose process-row delete gets no answer', () => {
  let db: TestDatabase;
  let app: INestApplicationContext | undefined;
  let locker: mysql.Connection;

  before(async () => {
    db = await TestDatabase.create();
    locker = await db.session();
  });
  after(async () => {
    await locker?.query('UNLOCK TABLES').catch(() => undefined);
    await app?.close().catch(() => undefined);
    await db?.drop();
  });

  it(`app.close() settles within ANSWER_BOUND_MS (${ANSWER_BOUND_MS} ms) + 2 s, and leaves no connection`, async (t) => {
    const started = await createLockApp(db.settings, { janitor: false });
    app = started.app;
    await (await started.locks.acquire('k')).release();
    await locker.query('LOCK TABLES db_lock_process WRITE');
    const closeStarted = performance.now();
    let closedAt = 0;
    const closing = app.close().then(
      () => (closedAt = performance.now()),
      () => (closedAt = performance.now()),
    );
    while (closedAt === 0 && performance.now() - closeStarted < HELD_UP_MS) await new Promise((r) => setTimeout(r, 100));
    await locker.query('UNLOCK TABLES');
    await closing;
    app = undefined;
    const tookMs = closedAt - closeStarted;
    t.diagnostic(`app.close() took ${Math.round(tookMs)} ms (the server held the statement up ${HELD_UP_MS} ms)`);
    assert.ok(
      tookMs < ANSWER_BOUND_MS + 2_000,
      `app.close() waited ${Math.round(tookMs)} ms for the answer to its process-row delete (the server held it up ${HELD_UP_MS} ms): ` +
        `no library statement should wait longer than ${ANSWER_BOUND_MS} ms`,
    );
    let n = -1;
    await eventually(
      async () => {
        const rows = await db.query<{ n: number }[]>(
          `SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST WHERE DB = ? AND ID <> CONNECTION_ID() AND ID <> ?`,
          [db.name, locker.threadId],
        );
        n = Number(rows[0]!.n);
        return n === 0;
      },
      3_000,
      'connections gone',
    ).catch(() => assert.fail(`${n} connection(s) of the closed app left`));
  });
});
