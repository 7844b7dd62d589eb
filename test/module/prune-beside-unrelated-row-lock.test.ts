/**
 * The janitor's prune beside a row-lock holder of an UNRELATED key (one none of whose log rows is due
 * for pruning). operations.md: "the janitor never waits on a holder"; the prune deletes terminal rows
 * past the retention. Where tokens are claimed, each prune batch lifts the key rows of the rows it
 * deletes (`UPDATE db_lock k JOIN (...) d ON d.lock_key = k.lock_key ...`); that statement must touch
 * only those key rows, not wait on the row lock a row-lock holder keeps on another key's row. The time
 * since the old lease holds is played by moving their rows' times back 20 minutes.
 */
import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import { createLockApp } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';
import type { JanitorReport, LockService } from '../../lib/index.js';

let db: TestDatabase;
let app: INestApplicationContext;
let locks: LockService;

before(async () => {
  db = await TestDatabase.create();
  ({ app, locks } = await createLockApp(db.settings, {
    leaseMs: 5_000,
    janitor: { intervalMs: 3_600_000, idleKeyMs: Infinity, batchSize: 1000, logRetentionMs: 60_000 },
  }));
});
after(async () => {
  await app?.close();
  await db?.drop();
});

it("a row-lock hold on an unrelated key does not stop the janitor from pruning other keys' old rows", async () => {
  for (const key of ['old:a', 'old:b', 'old:c']) {
    const l = await locks.acquire(key);
    await l.release();
  }
  await db.query(
    `UPDATE db_lock_log SET acquired_at = acquired_at - INTERVAL 20 MINUTE, expires_at = expires_at - INTERVAL 20 MINUTE, ` +
      `ended_at = ended_at - INTERVAL 20 MINUTE`,
  );
  // A key only ever row-locked (its only log row comes at its commit).
  const held = await locks.acquire('busy:rl', { strategy: 'row-lock', timeoutMs: 5_000 });
  let outcome: { report?: JanitorReport; error?: string; ms: number };
  try {
    const startedAt = performance.now();
    outcome = await locks.runJanitor().then(
      (report) => ({ report, ms: Math.round(performance.now() - startedAt) }),
      (e: Error) => ({ error: `${e.name}: ${e.message}`, ms: Math.round(performance.now() - startedAt) }),
    );
  } finally {
    await held.release();
  }
  const left = await db.query<{ k: string }[]>(
    `SELECT CAST(lock_key AS CHAR) AS k FROM db_lock_log WHERE ended_at < UTC_TIMESTAMP(6) - INTERVAL 10 MINUTE`,
  );
  assert.ok(
    outcome.error === undefined && outcome.report?.complete === true && left.length === 0,
    `the janitor run beside a row-lock holder of an unrelated key: ${JSON.stringify(outcome)}; old rows left unpruned: ${left.map((r) => r.k).join(',')}`,
  );
});
