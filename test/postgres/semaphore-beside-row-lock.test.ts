import 'reflect-metadata';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import { TestDatabase } from '../support/test-database.js';
import { createLockApp } from '../support/lock-app.js';
import { pgServerUrl, pgTestsRun } from '../support/pg-test-database.js';
import { timedOutcome } from '../support/settled.js';
import { LockTimeoutError, type LockService } from '../../lib/index.js';

/**
 * Semaphores beside row-lock holders of the same key on PostgreSQL (README: "A key is a lock or a
 * semaphore, never both at once", "Mixing strategies on one key is excluded both ways"). Permit
 * callers waiting on a row-lock holder's key row, and row-lock callers waiting on permits, must
 * get typed LockTimeoutError within their budget (plus the stated margin), never a driver error
 * (a lock_timeout's 55P03 or a cancel's 57014 reaching the caller), and get in once the other side
 * is gone. As the MySQL file, whose waits end on innodb_lock_wait_timeout instead.
 */

const BUDGET_MS = 700;
/** Slack past the budget for a loaded machine (the MySQL file's margin). */
const MARGIN_MS = 1_500;

type Outcome = { error?: unknown; value?: unknown; ms: number };
const told = (o: Outcome) =>
  o.error
    ? `${(o.error as Error).name} (${(o.error as Error).message.slice(0, 160)}) after ${Math.round(o.ms)} ms`
    : `${typeof o.value === 'object' && o.value !== null ? 'granted' : `resolved ${String(o.value)}`} after ${Math.round(o.ms)} ms`;

describe('semaphores beside row-lock holders of the same key on PostgreSQL', { skip: (await pgTestsRun()) ? false : 'no PostgreSQL server' }, () => {
  let db: TestDatabase;
  let a: INestApplicationContext;
  let b: INestApplicationContext;
  let la: LockService;
  let lb: LockService;

  before(async () => {
    db = await TestDatabase.forTarget({ serverUrl: pgServerUrl() });
    ({ app: a, locks: la } = await createLockApp(db.settings, { janitor: false, leaseMs: 5_000 }));
    ({ app: b, locks: lb } = await createLockApp(db.settings, { janitor: false, leaseMs: 5_000 }));
  });
  after(async () => {
    await a?.close();
    await b?.close();
    await db?.drop();
  });

  for (const mode of ['write', 'read'] as const) {
    it(`a row-lock ${mode} holder: permit callers time out typed within budget, then get in`, async (t) => {
      const key = `rl-holder-${mode}`;
      await la.withSemaphore(key, 2, () => undefined); // the key was used as a semaphore (no_lease_holders = 0)
      let release!: () => void;
      const holding = new Promise<void>((r) => (release = r));
      let entered!: () => void;
      const inside = new Promise<void>((r) => (entered = r));
      const holder = la.withLock(
        key,
        async () => {
          entered();
          await holding;
        },
        { strategy: 'row-lock', mode, timeoutMs: 5_000 },
      );
      await inside;
      const oneTry = await timedOutcome(() => lb.acquireSemaphore(key, 2, { timeoutMs: 0 }));
      const budget = await timedOutcome(() => lb.acquireSemaphore(key, 2, { timeoutMs: BUDGET_MS }));
      const skip = await timedOutcome(() => lb.runSemaphore(key, 2, () => 'ran', { onLocked: 'skip', transaction: 'none' }));
      release();
      await holder;
      const after = await timedOutcome(() => lb.acquireSemaphore(key, 2, { timeoutMs: 3_000 }));
      if (after.value) await after.value.release();
      for (const p of [oneTry, budget]) if (p.value) await p.value.release();
      t.diagnostic(`one try: ${told(oneTry)}; budget: ${told(budget)}; skip: ${told(skip)}; after: ${told(after)}`);
      assert.ok(oneTry.error instanceof LockTimeoutError, `one try beside a row-lock ${mode} holder: ${told(oneTry)}`);
      assert.ok(budget.error instanceof LockTimeoutError, `${BUDGET_MS} ms budget beside a row-lock ${mode} holder: ${told(budget)}`);
      assert.ok(budget.ms < BUDGET_MS + MARGIN_MS, `${BUDGET_MS} ms budget overran: ${told(budget)}`);
      assert.equal(skip.value, undefined, `skip beside a row-lock holder: ${told(skip)}`);
      assert.equal(skip.error, undefined, `skip beside a row-lock holder: ${told(skip)}`);
      assert.equal(after.error, undefined, `after the row-lock holder ended: ${told(after)}`);
      assert.ok(after.value, `after the row-lock holder ended: ${told(after)}`);
    });

    it(`permits held: a row-lock ${mode} caller times out typed within budget, then gets in`, async (t) => {
      const key = `permits-held-${mode}`;
      const permits = [await la.acquireSemaphore(key, 2), await la.acquireSemaphore(key, 2)];
      const oneTry = await timedOutcome(() => lb.withLock(key, () => 'ran', { strategy: 'row-lock', mode, timeoutMs: 0 }));
      const budget = await timedOutcome(() => lb.withLock(key, () => 'ran', { strategy: 'row-lock', mode, timeoutMs: BUDGET_MS }));
      for (const p of permits) await p.release();
      const after = await timedOutcome(() => lb.withLock(key, () => 'ran', { strategy: 'row-lock', mode, timeoutMs: 3_000 }));
      t.diagnostic(`one try: ${told(oneTry)}; budget: ${told(budget)}; after: ${told(after)}`);
      assert.ok(oneTry.error instanceof LockTimeoutError, `row-lock ${mode} one try beside 2 permits: ${told(oneTry)}`);
      assert.ok(budget.error instanceof LockTimeoutError, `row-lock ${mode} ${BUDGET_MS} ms beside 2 permits: ${told(budget)}`);
      assert.ok(budget.ms < BUDGET_MS + MARGIN_MS, `overran: ${told(budget)}`);
      assert.equal(after.error, undefined, `after the permits ended: ${told(after)}`);
      assert.equal(after.value, 'ran', `after the permits ended: ${told(after)}`);
    });
  }

  it('a permit inside a row-lock fenced call of another key, and a row-lock inside a fenced permit call', async () => {
    const r1 = await timedOutcome(() =>
      la.runLocked('rl-outer', () => la.runSemaphore('sem-inner', 2, () => la.currentLock!.fencingToken), { strategy: 'row-lock' }),
    );
    assert.equal(r1.error, undefined, `row-lock outer + permit inner: ${told(r1)}`);
    assert.equal(typeof r1.value, 'number', 'the inner permit saw its fencing token');
    const r2 = await timedOutcome(() =>
      la.runSemaphore('sem-outer', 2, () => la.runLocked('rl-inner', () => la.currentLock!.fencingToken, { strategy: 'row-lock' })),
    );
    assert.equal(r2.error, undefined, `permit outer + row-lock inner: ${told(r2)}`);
    assert.equal(typeof r2.value, 'number', 'the inner row-lock saw its fencing token');
    const live = await db.query<{ n: number }[]>(`SELECT COUNT(*) AS n FROM db_lock_log WHERE status IN ('ACQUIRED','COMPLETED')`);
    assert.equal(Number(live[0]!.n), 0, 'nothing left live');
    assert.equal(la.stats().held, 0, 'held back to 0');
    assert.equal(la.stats().waiting, 0, 'waiting back to 0');
  });
});
