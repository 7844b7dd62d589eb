import 'reflect-metadata';
/**
 * The janitor's reap beside a row-lock joined into a lease call's fenced transaction, on a key used
 * for the first time. A joined take cannot roll back; its key row is created before the take, in a
 * committed statement of its own (KeyRowsFirst), so the caller's transaction holds no lock on the
 * fencing floor row, which the reap takes exclusively. (When that creation fails, the take creates
 * the row inside the transaction, reading the floor with a shared lock: then the reap skips the
 * floor and reports its run incomplete.)
 *
 * operations.md: the janitor "deletes lock-table rows idle for janitor.idleKeyMs ..., skipping any
 * row someone has locked right now (a row-lock holder's key is in use: the janitor never waits on a
 * holder)". Expected: the run completes at once and reaps the other idle keys; a brand-new key is
 * granted meanwhile without waiting on the janitor.
 */
import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import { createLockApp } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';
import type { JanitorReport, LockService } from '../../lib/index.js';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

let db: TestDatabase;
let app: INestApplicationContext;
let locks: LockService;

before(async () => {
  db = await TestDatabase.create();
  ({ app, locks } = await createLockApp(db.settings, {
    leaseMs: 10_000,
    janitor: { intervalMs: 3_600_000, idleKeyMs: 200, batchSize: 1000, logRetentionMs: 24 * 3_600_000 },
  }));
});
after(async () => {
  await app?.close();
  await db?.drop();
});

it('a joined row-lock on a first-used key does not stop the janitor from reaping idle keys, nor hold up first grants of other keys', async () => {
  // An earlier reap: the fencing floor row exists from then on.
  await db.query(`INSERT INTO db_lock (lock_key, fencing_token, last_granted_at) VALUES ('pre:1', 7, UTC_TIMESTAMP(6) - INTERVAL 1 HOUR)`);
  const first = await locks.runJanitor();
  assert.equal(first.reapedKeys, 1);
  await db.query(
    `INSERT INTO db_lock (lock_key, fencing_token, last_granted_at) VALUES ` +
      [1, 2, 3, 4, 5].map((n) => `('idle:${n}', ${n}, UTC_TIMESTAMP(6) - INTERVAL 1 HOUR)`).join(', '),
  );
  let entered!: () => void;
  const inside = new Promise<void>((r) => (entered = r));
  const call = locks.runLocked('outer:lease', () =>
    locks.runLocked(
      'joined:fresh',
      async () => {
        entered();
        await sleep(3_500);
      },
      { strategy: 'row-lock' },
    ),
  );
  await inside;
  const startedAt = performance.now();
  const janitor = locks.runJanitor().then(
    (r: JanitorReport) => ({
      report: r as JanitorReport | undefined,
      error: undefined as string | undefined,
      ms: Math.round(performance.now() - startedAt),
    }),
    (e: Error) => ({ report: undefined, error: `${e.name}: ${e.message}`, ms: Math.round(performance.now() - startedAt) }),
  );
  await sleep(100);
  const t0 = performance.now();
  let fresh: string;
  try {
    const l = await locks.acquire('another:fresh', { timeoutMs: 600 });
    await l.release();
    fresh = `granted in ${Math.round(performance.now() - t0)} ms`;
  } catch (e) {
    fresh = `${(e as Error).name} after ${Math.round(performance.now() - t0)} ms`;
  }
  const outcome = await janitor;
  await call;
  // The holder's transaction holds nothing of the floor: the run completes at once and reaps the idle keys.
  assert.ok(
    outcome.error === undefined && outcome.report?.complete === true && outcome.report.reapedKeys === 5 && outcome.ms < 1_500,
    `janitor run beside the joined row-lock holder: ${JSON.stringify(outcome)}; a first grant of another key meanwhile: ${fresh}`,
  );
  assert.match(fresh, /^granted in \d+ ms$/, `a first grant of another key while the janitor ran: ${fresh}`);
  const next = await locks.runJanitor();
  const left = await db.query<{ k: string }[]>(`SELECT CAST(lock_key AS CHAR) AS k FROM db_lock WHERE lock_key LIKE 'idle:%'`);
  assert.ok(next.complete && left.length === 0, `the next run: ${JSON.stringify(next)}; idle keys left: ${left.map((r) => r.k).join(',')}`);
});
