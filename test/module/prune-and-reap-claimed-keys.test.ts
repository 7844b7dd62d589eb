/**
 * Tokens after the janitor prunes and reaps where tokens are claimed (one-INSERT grants leave the key
 * row behind the tokens handed out): operations.md "A key whose row was reaped keeps growing fencing
 * tokens when it comes back ... (tokens jump, never go back)". Twenty minutes are played by moving the
 * rows' times back (past the claims' keep time), then a janitor that keeps nothing runs; every key's
 * next grant (in a process started after: the one that released them still trusts them free, which
 * real time would have ended long before) (lease write, lease read, semaphore permit, row-lock) is above every token handed out
 * before, and inspect() never reports a token below the last one handed out while the key's rows exist.
 */
import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import { createLockApp } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';
import type { LockHandle, LockService } from '../../lib/index.js';
import { mysqlLogOf } from '../support/lock-internals.js';

let db: TestDatabase;
let app: INestApplicationContext;
let locks: LockService;

before(async () => {
  db = await TestDatabase.create();
  ({ app, locks } = await createLockApp(db.settings, {
    janitor: { intervalMs: 3_600_000, idleKeyMs: 0, batchSize: 2, logRetentionMs: 0 },
  }));
});
after(async () => {
  await app?.close();
  await db?.drop();
});

it('after a prune and a reap of claimed keys, every next grant is above every earlier token', async () => {
  assert.equal(mysqlLogOf(locks).schema.claims, true);
  const kinds: Record<string, () => Promise<LockHandle>> = {
    'claim:w': () => locks.acquire('claim:w'),
    'claim:r': () => locks.acquire('claim:r', { mode: 'read' }),
    'claim:s': () => locks.acquireSemaphore('claim:s', 3),
    'claim:m': () => locks.acquire('claim:m'),
  };
  const max: Record<string, number> = {};
  for (const [key, take] of Object.entries(kinds)) {
    for (let i = 0; i < 4; i++) {
      const h = await take();
      max[key] = Math.max(max[key] ?? 0, h.fencingToken);
      await h.release();
    }
  }
  // A key a lease used, then a row-lock (its take claims a token).
  const rl = await locks.acquire('claim:m', { strategy: 'row-lock' });
  max['claim:m'] = Math.max(max['claim:m']!, rl.fencingToken);
  await rl.release();
  const lagging = await db.query<{ k: string; t: string }[]>(
    `SELECT CAST(lock_key AS CHAR) AS k, fencing_token AS t FROM db_lock WHERE lock_key LIKE 'claim:%'`,
  );
  await db.query(
    `UPDATE db_lock_log SET acquired_at = acquired_at - INTERVAL 20 MINUTE, expires_at = expires_at - INTERVAL 20 MINUTE, ended_at = ended_at - INTERVAL 20 MINUTE`,
  );
  await db.query(`UPDATE db_lock SET last_granted_at = last_granted_at - INTERVAL 20 MINUTE`);
  const logBefore = await db.query(
    `SELECT id, mode, strategy, status, fencing_token, token_claim FROM db_lock_log WHERE lock_key = 'claim:m' ORDER BY id`,
  );
  const report = await locks.runJanitor();
  const floor = await db.query(`SELECT HEX(lock_key) AS k, fencing_token AS t FROM db_lock WHERE lock_key >= 0xFF`);
  assert.equal(report.complete, true);
  const problems: string[] = [];
  const left = await db.query<{ n: number }[]>(`SELECT COUNT(*) AS n FROM db_lock WHERE lock_key LIKE 'claim:%'`);
  if (Number(left[0]!.n) !== 0) problems.push(`key rows not reaped: ${left[0]!.n}`);
  // A process started now: the 20 minutes are past every key this process still trusts free after its releases (KnownFreeKeys).
  const later = await createLockApp(db.settings, { janitor: false });
  const laterKinds: Record<string, () => Promise<LockHandle>> = {
    'claim:w': () => later.locks.acquire('claim:w'),
    'claim:r': () => later.locks.acquire('claim:r', { mode: 'read' }),
    'claim:s': () => later.locks.acquireSemaphore('claim:s', 3),
    'claim:m': () => later.locks.acquire('claim:m'),
  };
  for (const [key, take] of Object.entries(laterKinds)) {
    const h = await take();
    if (!(h.fencingToken > max[key]!)) problems.push(`${key}: token ${h.fencingToken} after the janitor, not above ${max[key]}`);
    const info = await locks.inspect(key);
    if (info.fencingToken < h.fencingToken) problems.push(`${key}: inspect says ${info.fencingToken}, below the held ${h.fencingToken}`);
    await h.release();
  }
  await later.app.close();
  assert.deepEqual(
    problems,
    [],
    `key rows before the janitor (lagging behind claims): ${JSON.stringify(lagging)}; janitor ${JSON.stringify(report)}; claim:m log before: ${JSON.stringify(logBefore)}; internal rows after: ${JSON.stringify(floor)}`,
  );
});
