/**
 * The janitor's prune beside a row-lock holder of a key whose old lease rows are past the retention.
 *
 * operations.md: the janitor "deletes terminal log rows whose ended_at is older than
 * janitor.logRetentionMs", "skipping any row someone has locked right now (a row-lock holder's key is
 * in use: the janitor never waits on a holder)", and "Every statement touches at most batchSize rows
 * ... so none holds many row locks". A key may be used by both strategies (the log is shared).
 *
 * Where tokens are claimed (AddTokenClaims), each prune batch first lifts the key rows of the rows it
 * deletes (`UPDATE db_lock k JOIN ...`): that UPDATE needs the key row, which a row-lock writer keeps
 * locked for its whole hold. The time that passed since the old lease hold is played by moving its
 * row's times back (as if it had ended 20 minutes ago).
 */
import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import { createLockApp } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';
import type { JanitorReport, LockService } from '../../lib/index.js';
import { mysqlLogOf } from '../support/lock-internals.js';

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

it('a row-lock hold on a key does not stop the janitor from pruning the log (it never waits on a holder)', async () => {
  assert.equal(mysqlLogOf(locks).schema.claims, true);
  // An old lease hold of the key, ended 20 minutes ago (past the retention and the claims' keep time).
  const lease = await locks.acquire('mixed:k');
  await lease.release();
  await db.query(
    `UPDATE db_lock_log SET acquired_at = acquired_at - INTERVAL 20 MINUTE, expires_at = expires_at - INTERVAL 20 MINUTE, ` +
      `ended_at = ended_at - INTERVAL 20 MINUTE WHERE lock_key = 'mixed:k'`,
  );
  // Other old rows on another key, to be pruned as well.
  const other = await locks.acquire('other:k');
  await other.release();
  await db.query(
    `UPDATE db_lock_log SET acquired_at = acquired_at - INTERVAL 20 MINUTE, expires_at = expires_at - INTERVAL 20 MINUTE, ` +
      `ended_at = ended_at - INTERVAL 20 MINUTE WHERE lock_key = 'other:k'`,
  );
  const held = await locks.acquire('mixed:k', { strategy: 'row-lock', timeoutMs: 5_000 });
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
  const oldRows = `SELECT CAST(lock_key AS CHAR) AS k, status FROM db_lock_log WHERE ended_at < UTC_TIMESTAMP(6) - INTERVAL 10 MINUTE`;
  const left = await db.query<{ k: string; status: string }[]>(oldRows);
  assert.ok(
    outcome.error === undefined && outcome.report?.complete === true && outcome.ms < 2_000,
    `the janitor run beside the row-lock holder: ${JSON.stringify(outcome)}; old rows left unpruned: ${JSON.stringify(left)}`,
  );
  // The held key's claim stays while its key row is locked (it could not be lifted above it); the other key's rows go.
  assert.deepEqual(
    left.map((r) => r.k),
    ['mixed:k'],
    `old ended rows left beside the holder: ${JSON.stringify(left)}`,
  );
  await locks.runJanitor();
  const after = await db.query<{ k: string }[]>(oldRows);
  assert.equal(after.length, 0, `old ended rows left once the holder committed: ${JSON.stringify(after)}`);
});
