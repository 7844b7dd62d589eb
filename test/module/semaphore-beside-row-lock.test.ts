import 'reflect-metadata';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import { TestDatabase } from '../support/test-database.js';
import { createLockApp } from '../support/lock-app.js';
import { DbLockError, LockTimeoutError, type LockService } from '../../lib/index.js';

/**
 * Semaphores beside row-lock holders of the same key (README: "A key is a lock
 * or a semaphore, never both at once", "Mixing strategies on one key is excluded both ways").
 * Permit callers waiting on a row-lock holder's key row, and row-lock callers waiting on permits,
 * must get typed LockTimeoutError within their budget (plus the stated margin), never a driver
 * error, and get in once the other side is gone.
 */
describe('semaphores beside row-lock holders of the same key', () => {
  let db: TestDatabase;
  let a: INestApplicationContext;
  let b: INestApplicationContext;
  let la: LockService;
  let lb: LockService;

  before(async () => {
    db = await TestDatabase.create();
    ({ app: a, locks: la } = await createLockApp(db.settings, { janitor: false, leaseMs: 5_000 }));
    ({ app: b, locks: lb } = await createLockApp(db.settings, { janitor: false, leaseMs: 5_000 }));
  });
  after(async () => {
    await a?.close();
    await b?.close();
    await db?.drop();
  });

  async function outcome<T>(p: Promise<T>): Promise<{ value?: T; error?: unknown; ms: number }> {
    const started = performance.now();
    try {
      const value = await p;
      return { value, ms: performance.now() - started };
    } catch (error) {
      return { error, ms: performance.now() - started };
    }
  }

  for (const mode of ['write', 'read'] as const) {
    it(`a row-lock ${mode} holder: permit callers time out typed within budget, then get in`, async () => {
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
      const oneTry = await outcome(lb.acquireSemaphore(key, 2, { timeoutMs: 0 }));
      const budget = await outcome(lb.acquireSemaphore(key, 2, { timeoutMs: 700 }));
      const skip = await outcome(lb.runSemaphore(key, 2, () => 'ran', { onLocked: 'skip', transaction: 'none' }));
      release();
      await holder;
      const after = await outcome(lb.acquireSemaphore(key, 2, { timeoutMs: 3_000 }));
      if (after.value) await after.value.release();
      for (const p of [oneTry, budget]) if (p.value) await p.value.release();
      const describe = (o: { error?: unknown; value?: unknown; ms: number }) =>
        o.error
          ? `${(o.error as Error).name} (${(o.error as Error).message.slice(0, 160)}) after ${Math.round(o.ms)} ms`
          : `granted after ${Math.round(o.ms)} ms`;
      assert.ok(oneTry.error instanceof LockTimeoutError, `one try beside a row-lock ${mode} holder: ${describe(oneTry)}`);
      assert.ok(budget.error instanceof LockTimeoutError, `700 ms budget beside a row-lock ${mode} holder: ${describe(budget)}`);
      assert.ok(budget.ms < 700 + 1_500, `700 ms budget overran: ${describe(budget)}`);
      assert.equal(skip.value, undefined, `skip beside a row-lock holder: ${describe(skip)}`);
      assert.equal(skip.error, undefined, `skip beside a row-lock holder: ${describe(skip)}`);
      assert.ok(after.value, `after the row-lock holder ended: ${describe(after)}`);
    });

    it(`permits held: a row-lock ${mode} caller times out typed within budget, then gets in`, async () => {
      const key = `permits-held-${mode}`;
      const permits = [await la.acquireSemaphore(key, 2), await la.acquireSemaphore(key, 2)];
      const oneTry = await outcome(lb.withLock(key, () => 'ran', { strategy: 'row-lock', mode, timeoutMs: 0 }));
      const budget = await outcome(lb.withLock(key, () => 'ran', { strategy: 'row-lock', mode, timeoutMs: 700 }));
      for (const p of permits) await p.release();
      const after = await outcome(lb.withLock(key, () => 'ran', { strategy: 'row-lock', mode, timeoutMs: 3_000 }));
      const describe = (o: { error?: unknown; value?: unknown; ms: number }) =>
        o.error
          ? `${(o.error as Error).name} (${(o.error as Error).message.slice(0, 160)}) after ${Math.round(o.ms)} ms`
          : `${String(o.value)} after ${Math.round(o.ms)} ms`;
      assert.ok(oneTry.error instanceof LockTimeoutError, `row-lock ${mode} one try beside 2 permits: ${describe(oneTry)}`);
      assert.ok(budget.error instanceof LockTimeoutError, `row-lock ${mode} 700 ms beside 2 permits: ${describe(budget)}`);
      assert.ok(budget.ms < 700 + 1_500, `overran: ${describe(budget)}`);
      assert.equal(after.value, 'ran', `after the permits ended: ${describe(after)}`);
      assert.ok(!(after.error instanceof DbLockError) || after.error === undefined);
    });
  }

  it('a permit inside a row-lock fenced call of another key, and a row-lock inside a @Semaphore-like fenced permit call', async () => {
    const r1 = await outcome(
      la.runLocked('rl-outer', () => la.runSemaphore('sem-inner', 2, () => la.currentLock!.fencingToken), { strategy: 'row-lock' }),
    );
    assert.equal(r1.error, undefined, `row-lock outer + permit inner: ${String(r1.error)}`);
    const r2 = await outcome(
      la.runSemaphore('sem-outer', 2, () => la.runLocked('rl-inner', () => la.currentLock!.fencingToken, { strategy: 'row-lock' })),
    );
    assert.equal(r2.error, undefined, `permit outer + row-lock inner: ${String(r2.error)}`);
    const live = await db.query<{ n: number }[]>(`SELECT COUNT(*) AS n FROM db_lock_log WHERE status IN ('ACQUIRED','COMPLETED')`);
    assert.equal(Number(live[0]!.n), 0, 'nothing left live');
    await sleep(1);
  });
});
