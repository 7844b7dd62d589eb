import 'reflect-metadata';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { TestDatabase } from '../support/test-database.js';
import { createLockApp, eventually } from '../support/lock-app.js';
import { type LockHandle } from '../../lib/index.js';

/**
 * A row-lock hold that ends without a release (maxHoldMs, its connection killed) gives its
 * connection slot back: a caller queued for the slot then gets it within its budget. maxHoldMs
 * counts from the grant, not from when the caller began to wait.
 */
describe('row-lock slots come back from holds that end without a release', () => {
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

  it('maxHoldMs: the slot of the abandoned hold goes to the queued caller; its own maxHoldMs counts from its grant', async () => {
    const { app, locks } = await createLockApp(db.settings, { strategy: 'row-lock', janitor: false, maxHoldMs: 600 }, { poolSize: 2 });
    try {
      for (const k of ['mh:a', 'mh:b']) await locks.withLock(k, async () => undefined);
      const a = await locks.acquire('mh:a');
      const t0 = performance.now();
      const b: LockHandle = await locks.acquire('mh:b', { timeoutMs: 3_000 });
      const waited = performance.now() - t0;
      assert.ok(a.signal.aborted, 'the first hold was not given up at maxHoldMs');
      assert.ok(
        waited >= 450 && waited < 1_500,
        `the queued caller got the slot after ${waited.toFixed(0)} ms (expected ~600 ms, at the first hold's maxHoldMs)`,
      );
      await new Promise((r) => setTimeout(r, 300));
      assert.ok(
        !b.signal.aborted,
        `the second hold was lost ${(performance.now() - t0).toFixed(0)} ms after its caller began to wait, only ~300 ms after its grant (maxHoldMs 600 counted from the wait?)`,
      );
      await b.release();
      await a.release().catch(() => undefined);
      const c = await locks.acquire('mh:a', { timeoutMs: 1_000 });
      await c.release();
    } finally {
      await app.close();
    }
  });

  it('holder connection killed: the slot frees for a queued caller, no session leaks', async () => {
    const { app, locks } = await createLockApp(db.settings, { strategy: 'row-lock', janitor: false }, { poolSize: 2 });
    try {
      for (const k of ['kc:a', 'kc:b']) await locks.withLock(k, async () => undefined);
      let id = 0;
      const holder = locks
        .runLocked('kc:a', async () => {
          const lock = locks.currentLock!;
          const rows = (await locks.manager.query('SELECT CONNECTION_ID() AS id')) as { id: number }[];
          id = Number(rows[0]!.id);
          await new Promise<void>((resolve) => lock.signal.addEventListener('abort', () => resolve()));
          return 'aborted';
        })
        .catch((e: Error) => e.name);
      // the hold's own connection: the one in a transaction holding the key row
      await eventually(() => id > 0, 3_000, 'the holder transaction');
      const queued = locks.acquire('kc:b', { timeoutMs: 3_000 }).then(
        async (h) => {
          await h.release();
          return 'granted';
        },
        (e: Error) => e.name,
      );
      await new Promise((r) => setTimeout(r, 100));
      await db.query(`KILL ${id}`);
      assert.equal(await queued, 'granted', 'the caller queued for the slot did not get it after the holder connection was killed');
      assert.equal(await holder, 'LockLostError', 'the killed holder did not hear LockLostError');
    } finally {
      await app.close();
    }
    await eventually(async () => (await sessions()) === 0, 3_000, 'no session after close');
  });
});
