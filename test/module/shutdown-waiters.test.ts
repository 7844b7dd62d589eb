import 'reflect-metadata';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createLockApp, eventually } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';
import { DbLockError } from '../../lib/index.js';

/**
 * Shutdown (docs/guide/operations.md, "Graceful shutdown"): waiting callers are rejected,
 * every lock still held is released, and nothing of the library stays open. Here with the
 * row-lock strategy, whose waiters wait inside the server.
 */
/**
 * The app's connections still in the server's process list after close: the server drops a closed
 * connection's thread a moment after the client's QUIT, so the count is read until it is 0, for up
 * to 2 s (a leaked connection stays for good and still fails).
 */
async function connectionsLeft(db: TestDatabase): Promise<number> {
  const deadline = performance.now() + 2_000;
  for (;;) {
    const [row] = await db.query<{ n: number }[]>(`SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST WHERE DB = ? AND ID <> CONNECTION_ID()`, [
      db.name,
    ]);
    const n = Number(row!.n);
    if (n === 0 || performance.now() >= deadline) return n;
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('shutdown with row-lock waiters in the server', () => {
  let db: TestDatabase;
  before(async () => {
    db = await TestDatabase.create();
  });
  after(async () => {
    await db?.drop();
  });

  it('app.close() while a row-lock caller waits in the server behind a held row-lock: no hang, the waiter rejected, the holder given up (rolled back)', async () => {
    const { app, locks } = await createLockApp(db.settings, { strategy: 'row-lock', shutdownTimeoutMs: 1_000, janitor: false });
    let closed = false;
    let seen: Record<string, unknown>;
    try {
      const held = await locks.acquire('k');
      const t0 = performance.now();
      const waiter = locks.acquire('k', { timeoutMs: 8_000 }).then(
        (lock) => ({ outcome: 'granted', lock, at: performance.now() - t0 }),
        (error: unknown) => ({ outcome: (error as Error).name, error, at: performance.now() - t0 }),
      );
      await eventually(async () => (await db.lockWaits()) >= 1, 5_000, 'the waiter blocked in the server');
      const c0 = performance.now();
      await app.close();
      closed = true;
      const closeMs = performance.now() - c0;
      const w = await waiter;
      // Margins: the waiter's budget is 8 s; a prompt shutdown takes well under 3 s here.
      seen = {
        closeWithin3s: closeMs < 3_000,
        waiter: w.outcome,
        waiterTyped: 'error' in w && w.error instanceof DbLockError,
        waiterRejectedWithin3sOfClose: w.at - (c0 - t0) < 3_000,
        heldReleased: held.released,
        heldAborted: held.signal.aborted,
      };
      console.log(`# close took ${Math.round(closeMs)} ms; the waiter settled ${Math.round(w.at - (c0 - t0))} ms after close began`);
    } finally {
      if (!closed) await app.close();
    }
    const rows = await db.logRows('k');
    const conns = await connectionsLeft(db);
    assert.deepEqual(
      { ...seen, statuses: rows.map((r) => r.status), connectionsLeft: conns },
      {
        closeWithin3s: true,
        waiter: 'DbLockError',
        waiterTyped: true,
        waiterRejectedWithin3sOfClose: true,
        heldReleased: true,
        heldAborted: true,
        // A row-lock held at shutdown is its open transaction: rolled back, never committed under its holder.
        statuses: ['EXPIRED'],
        connectionsLeft: 0,
      },
    );
  });

  it('semaphores at shutdown: a permit waiter is rejected typed at once, held permits are released (RELEASED rows), no connection left', async () => {
    const { app, locks } = await createLockApp(db.settings, { leaseMs: 20_000, shutdownTimeoutMs: 300, janitor: false });
    let closed = false;
    try {
      const plain = await locks.acquireSemaphore('sem', 2);
      let entered!: () => void;
      const inside = new Promise<void>((r) => (entered = r));
      const running = locks
        .withSemaphore('sem', 2, async (permit) => {
          entered();
          while (!permit.signal.aborted) await new Promise((r) => setTimeout(r, 10));
        })
        .then(
          () => 'resolved',
          (e: unknown) => (e as Error).name,
        );
      await inside;
      const t0 = performance.now();
      const waiter = locks.acquireSemaphore('sem', 2, { timeoutMs: 8_000 }).then(
        () => ({ outcome: 'granted', at: performance.now() - t0 }),
        (e: unknown) => ({ outcome: (e as Error).name, typed: e instanceof DbLockError, at: performance.now() - t0 }),
      );
      await eventually(() => locks.stats().waiting >= 1, 5_000, 'the permit waiter waits');
      const c0 = performance.now();
      await app.close();
      closed = true;
      const closeMs = performance.now() - c0;
      const w = await waiter;
      // Margins: shutdownTimeoutMs 300 plus releases; 3 s for a loaded machine (the waiter's budget is 8 s).
      assert.ok(closeMs < 3_000, `close took ${Math.round(closeMs)} ms`);
      assert.equal(w.outcome, 'DbLockError');
      assert.ok(w.at - (c0 - t0) < 1_000, `the waiter was rejected ${Math.round(w.at - (c0 - t0))} ms after close began`);
      assert.equal(plain.released, true);
      assert.equal(plain.signal.aborted, true);
      assert.equal(await running, 'LockLostError', 'the running holder past shutdownTimeoutMs was cut');
    } finally {
      if (!closed) await app.close();
    }
    const rows = await db.logRows('sem');
    assert.deepEqual(
      rows.map((r) => `${r.mode}:${r.status}`),
      ['permit:RELEASED', 'permit:RELEASED'],
    );
    const conns = await connectionsLeft(db);
    assert.equal(conns, 0, 'no connection of the app left');
  });

  it('a lease holder that releases when shutdown aborts its signal: its rows end RELEASED (released at shutdown), as when shutdown releases it', async () => {
    const { app, locks } = await createLockApp(db.settings, { leaseMs: 20_000, shutdownTimeoutMs: 300, janitor: false });
    let closed = false;
    let released: Promise<string> | undefined;
    try {
      const lock = await locks.acquire('self-release');
      // The holder's own release starts inside the abort, before shutdown's release of held locks.
      lock.signal.addEventListener('abort', () => {
        released = lock.release().then(
          () => 'resolved',
          (e: unknown) => (e as Error).name,
        );
      });
      await app.close();
      closed = true;
    } finally {
      if (!closed) await app.close();
    }
    assert.equal(await released, 'LockLostError', 'the holder hears that shutdown took its lock');
    const rows = await db.logRows('self-release');
    assert.deepEqual(
      rows.map((r) => `${r.status}:${r.note}`),
      ['RELEASED:released at shutdown'],
    );
  });
});
