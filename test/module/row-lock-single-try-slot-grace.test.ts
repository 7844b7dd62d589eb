import 'reflect-metadata';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { TestDatabase } from '../support/test-database.js';
import { createLockApp } from '../support/lock-app.js';
import type { LockService } from '../../lib/index.js';

/**
 * README (per call options): `timeoutMs` "`0` one try (always sent: a connection for it is waited for
 * at least 250 ms)"; Connections per process, row-lock: "a caller waits for one only within its
 * timeoutMs (at least 250 ms)". With the DataSource pool at 3 (row-lock sessions: at most 2), two
 * holders of other keys release after ~100 ms: a one try on a FREE key, made while they hold,
 * must wait that moment for a connection and be granted, not answered "locked" without being sent.
 */
describe('row-lock one try while every row-lock connection slot is taken by holders of other keys', () => {
  let db: TestDatabase;
  let locks: LockService;
  let close: () => Promise<void>;
  before(async () => {
    db = await TestDatabase.create();
    const made = await createLockApp(db.settings, { strategy: 'row-lock', janitor: false }, { poolSize: 3 });
    locks = made.locks;
    close = () => made.app.close();
  });
  after(async () => {
    await close?.();
    await db?.drop();
  });

  async function withBusySlots<T>(tag: string, oneTry: () => Promise<T>): Promise<{ result: T; ms: number }> {
    // first use of the keys outside the measurement (rare path)
    for (const k of [`${tag}:h1`, `${tag}:h2`, `${tag}:free`]) await locks.withLock(k, async () => undefined);
    let started!: () => void;
    const bothIn = new Promise<void>((r) => (started = r));
    let inside = 0;
    const holders = [`${tag}:h1`, `${tag}:h2`].map((k) =>
      locks.withLock(k, async () => {
        if (++inside === 2) started();
        await new Promise((r) => setTimeout(r, 100));
      }),
    );
    await bothIn;
    const t0 = performance.now();
    const result = await oneTry();
    const ms = performance.now() - t0;
    await Promise.all(holders);
    return { result, ms };
  }

  it('tryAcquire on a free key is granted (the slot frees within the 250 ms connection grace)', async () => {
    const { result, ms } = await withBusySlots('ta', () => locks.tryAcquire('ta:free'));
    const got = result !== null;
    if (result) await result.release();
    assert.ok(
      got,
      `tryAcquire('ta:free') answered null after ${ms.toFixed(0)} ms though nobody holds that key and a connection freed ~100 ms later (README: a one try's connection is waited for at least 250 ms)`,
    );
  });

  it('acquire({ timeoutMs: 0 }) on a free key is granted', async () => {
    const { result, ms } = await withBusySlots('t0', () =>
      locks.acquire('t0:free', { timeoutMs: 0 }).then(
        async (h) => {
          await h.release();
          return 'granted';
        },
        (e: Error) => e.name,
      ),
    );
    assert.equal(
      result,
      'granted',
      `acquire('t0:free', { timeoutMs: 0 }) gave ${result} after ${ms.toFixed(0)} ms though the key is free and a connection freed ~100 ms later`,
    );
  });

  it("runLocked onLocked 'skip' on a free key runs", async () => {
    const { result, ms } = await withBusySlots('sk', () => locks.runLocked('sk:free', async () => 'ran', { onLocked: 'skip', transaction: 'none' }));
    assert.equal(
      result,
      'ran',
      `the skip job on a free key was skipped (${String(result)}) after ${ms.toFixed(0)} ms: it was never sent, only because row-lock holders of other keys had every slot for ~100 ms more`,
    );
  });

  it('timeoutMs: 100 on a free key is granted (connection wait is at least 250 ms)', async () => {
    const { result, ms } = await withBusySlots('t1', () =>
      locks.acquire('t1:free', { timeoutMs: 100 }).then(
        async (h) => {
          await h.release();
          return 'granted';
        },
        (e: Error) => e.name,
      ),
    );
    assert.equal(
      result,
      'granted',
      `acquire('t1:free', { timeoutMs: 100 }) gave ${result} after ${ms.toFixed(0)} ms; README: a row-lock caller waits for a connection within its timeoutMs, at least 250 ms`,
    );
  });
});
