import 'reflect-metadata';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { TestDatabase } from '../support/test-database.js';
import { createLockApp, eventually } from '../support/lock-app.js';
import { DbLockError, LockTimeoutError, TooManyLockWaitersError, type LockHandle } from '../../lib/index.js';

/** Row-lock waiting: the slot queue bound, sub-second budgets, readers/multi-key, shutdown while queued. */
describe('row-lock waiting for a connection slot and in the database', () => {
  let db: TestDatabase;
  before(async () => {
    db = await TestDatabase.create();
  });
  after(async () => {
    await db?.drop();
  });

  async function sessions(): Promise<number> {
    const rows = await db.query<{ n: number }[]>(`SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST WHERE DB = ? AND ID <> CONNECTION_ID()`, [
      db.name,
    ]);
    return Number(rows[0]!.n);
  }
  const outcome = (p: Promise<LockHandle>) =>
    p.then(
      async (h) => {
        await h.release();
        return 'granted';
      },
      (e: Error) => e,
    );

  it('maxRowLockWaiters bounds only callers queued for a slot; timed-out ones free their place', async () => {
    const { app, locks } = await createLockApp(db.settings, { strategy: 'row-lock', janitor: false, maxRowLockWaiters: 2 }, { poolSize: 3 });
    try {
      for (const k of ['mw:h', 'mw:q1', 'mw:q2', 'mw:q3', 'mw:q4']) await locks.withLock(k, async () => undefined);
      const holder = await locks.acquire('mw:h');
      // waits in the database on the held key: takes the second slot, not a queue place
      const inDb = outcome(locks.acquire('mw:h', { timeoutMs: 3_000 }));
      await eventually(async () => (await sessions()) >= 2, 3_000, 'the database waiter');
      const q1 = outcome(locks.acquire('mw:q1', { timeoutMs: 400 }));
      const q2 = outcome(locks.acquire('mw:q2', { timeoutMs: 400 }));
      await new Promise((r) => setTimeout(r, 20));
      const third = await outcome(locks.acquire('mw:q3', { timeoutMs: 400 }));
      assert.ok(
        third instanceof TooManyLockWaitersError,
        `the third caller queued for a slot (bound 2) got ${String(third)}, expected TooManyLockWaitersError`,
      );
      const [r1, r2] = await Promise.all([q1, q2]);
      assert.ok(
        r1 instanceof LockTimeoutError && r2 instanceof LockTimeoutError,
        `queued callers: ${String(r1)} / ${String(r2)}; expected LockTimeoutError at their budget`,
      );
      // their places are free again: a new caller queues (then gets its slot when the holder goes)
      const again = outcome(locks.acquire('mw:q4', { timeoutMs: 3_000 }));
      await new Promise((r) => setTimeout(r, 50));
      await holder.release();
      const [rAgain, rDb] = await Promise.all([again, inDb]);
      assert.equal(rAgain, 'granted', `after the queued callers timed out, a new caller got ${String(rAgain)}`);
      assert.equal(rDb, 'granted', `the database waiter got ${String(rDb)}`);
    } finally {
      await app.close();
    }
  });

  it('sub-second budgets hold: 300 ms in the database, 600 ms in the slot queue (margin +250 ms)', async () => {
    const { app, locks } = await createLockApp(db.settings, { strategy: 'row-lock', janitor: false }, { poolSize: 3 });
    try {
      for (const k of ['sb:h', 'sb:f']) await locks.withLock(k, async () => undefined);
      const holder = await locks.acquire('sb:h');
      let t0 = performance.now();
      const inDb = await outcome(locks.acquire('sb:h', { timeoutMs: 300 }));
      let ms = performance.now() - t0;
      assert.ok(inDb instanceof LockTimeoutError, `database waiter: ${String(inDb)}`);
      assert.ok(ms >= 290 && ms <= 550, `database waiter with timeoutMs 300 answered after ${ms.toFixed(0)} ms`);
      const second = await locks.acquire('sb:f'); // both slots taken now
      t0 = performance.now();
      const queued = await outcome(locks.acquire('sb:x', { timeoutMs: 600 }));
      ms = performance.now() - t0;
      assert.ok(queued instanceof LockTimeoutError, `slot waiter: ${String(queued)}`);
      assert.ok(ms >= 590 && ms <= 850, `slot waiter with timeoutMs 600 answered after ${ms.toFixed(0)} ms`);
      await holder.release();
      await second.release();
    } finally {
      await app.close();
    }
  });

  it('readers share, a writer waits behind them within its budget, a multi-key take that timed out holds nothing', async () => {
    const { app, locks } = await createLockApp(db.settings, { strategy: 'row-lock', janitor: false }, { poolSize: 6 });
    try {
      for (const k of ['rw:k', 'rw:a', 'rw:b']) await locks.withLock(k, async () => undefined);
      const r1 = await locks.acquire('rw:k', { mode: 'read', timeoutMs: 1_000 });
      const r2 = await locks.acquire('rw:k', { mode: 'read', timeoutMs: 1_000 });
      const w = await outcome(locks.acquire('rw:k', { timeoutMs: 300 }));
      assert.ok(w instanceof LockTimeoutError, `writer behind two readers: ${String(w)}`);
      await r1.release();
      await r2.release();
      const b = await locks.acquire('rw:b');
      const multi = await outcome(locks.acquire(['rw:a', 'rw:b'], { timeoutMs: 300 }));
      assert.ok(multi instanceof LockTimeoutError, `multi-key behind a holder of b: ${String(multi)}`);
      const a = await outcome(locks.acquire('rw:a', { timeoutMs: 0 }));
      assert.equal(a, 'granted', `a multi-key take that timed out still holds 'rw:a': ${String(a)}`);
      await b.release();
    } finally {
      await app.close();
    }
  });

  it('sub-second budgets of a reader behind a writer and of a mixed multi-key take (margin +250 ms); nothing left locked', async () => {
    const { app, locks } = await createLockApp(db.settings, { strategy: 'row-lock', janitor: false }, { poolSize: 6 });
    try {
      for (const k of ['ss:w', 'ss:a', 'ss:b']) await locks.withLock(k, async () => undefined);
      const w = await locks.acquire('ss:w');
      let t0 = performance.now();
      const reader = await outcome(locks.acquire('ss:w', { mode: 'read', timeoutMs: 300 }));
      let ms = performance.now() - t0;
      assert.ok(reader instanceof LockTimeoutError, `reader behind a writer: ${String(reader)}`);
      assert.ok(ms >= 290 && ms <= 550, `reader with timeoutMs 300 answered after ${ms.toFixed(0)} ms`);
      await w.release();
      const b = await locks.acquire('ss:b');
      t0 = performance.now();
      const mixed = await outcome(
        locks.acquire(
          [
            { key: 'ss:a', mode: 'read' },
            { key: 'ss:b', mode: 'write' },
          ],
          { timeoutMs: 300 },
        ),
      );
      ms = performance.now() - t0;
      assert.ok(mixed instanceof LockTimeoutError, `mixed multi-key behind a holder of b: ${String(mixed)}`);
      assert.ok(ms >= 290 && ms <= 550, `mixed multi-key with timeoutMs 300 answered after ${ms.toFixed(0)} ms`);
      const a = await outcome(locks.acquire('ss:a', { timeoutMs: 0 }));
      assert.equal(a, 'granted', `writer on 'ss:a' after the mixed take timed out: ${String(a)}`);
      await b.release();
    } finally {
      await app.close();
    }
  });

  it('app.close() while callers wait (in the database and for a slot): typed rejections, no session left open', async () => {
    const { app, locks } = await createLockApp(db.settings, { strategy: 'row-lock', janitor: false, shutdownTimeoutMs: 1_000 }, { poolSize: 3 });
    for (const k of ['cl:h', 'cl:q1', 'cl:q2']) await locks.withLock(k, async () => undefined);
    const holder = await locks.acquire('cl:h');
    const inDb = outcome(locks.acquire('cl:h', { timeoutMs: 20_000 }));
    await eventually(async () => (await sessions()) >= 2, 3_000, 'the database waiter');
    const q1 = outcome(locks.acquire('cl:q1', { timeoutMs: 20_000 }));
    const q2 = outcome(locks.acquire('cl:q2', { timeoutMs: Infinity }));
    await new Promise((r) => setTimeout(r, 100));
    const t0 = performance.now();
    await app.close();
    const closeMs = performance.now() - t0;
    const results = await Promise.race([
      Promise.all([inDb, q1, q2]),
      new Promise<string>((r) => setTimeout(() => r('callers still pending 3 s after close'), 3_000)),
    ]);
    assert.ok(Array.isArray(results), String(results));
    for (const [i, r] of results.entries())
      assert.ok(r instanceof DbLockError, `caller ${i} after close: ${String(r)} (${(r as Error)?.constructor?.name}); expected a typed DbLockError`);
    assert.ok(holder.signal.aborted, 'the holder signal did not abort at shutdown');
    await eventually(async () => (await sessions()) === 0, 3_000, 'no session of the test DB after close').catch(async () => {
      assert.fail(`${await sessions()} sessions of the test DB still open 3 s after app.close() (close took ${closeMs.toFixed(0)} ms)`);
    });
  });
});
