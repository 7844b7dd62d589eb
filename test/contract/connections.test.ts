import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import { type LockHandle, type LockService, TooManyLockWaitersError } from '../../lib/index.js';
import { createLockApp } from '../support/lock-app.js';
import { DataSource } from 'typeorm';
import { TestDatabase } from '../support/test-database.js';
import { callerTrips } from '../support/round-trips.js';

/**
 * What each strategy costs in connections while it holds. A lease lock holds none: any number of
 * held locks live on the library's small pool (default 4) plus the DataSource's idle ones. A
 * row-lock holds one DataSource connection per holder and per waiter, so the process fails fast
 * with TooManyLockWaitersError, sending nothing, rather than drain the pool it needs itself.
 */
const HELD = 200;
const POOL = 10; // the test DataSource's pool (test/support/lock-app.ts)

describe('connections held while holding locks', () => {
  let db: TestDatabase;
  let app: INestApplicationContext;
  let locks: LockService;
  before(async () => {
    db = await TestDatabase.create();
    // No janitor: its cluster-wide lock goes through the lock path, and a tick mid-test would add to the lock round trips counted here.
    ({ app, locks } = await createLockApp(db.settings, { leaseMs: 30_000, janitor: false }));
  });
  after(async () => {
    await app?.close();
    await db?.drop();
  });

  async function connections(): Promise<number> {
    const [row] = await db.query<{ n: number }[]>('SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST WHERE db = ? AND id <> CONNECTION_ID()', [
      db.name,
    ]);
    return Number(row!.n);
  }

  it(`lease: ${HELD} held locks hold no connection each`, async (t) => {
    const held: LockHandle[] = [];
    for (let i = 0; i < HELD; i++) held.push(await locks.acquire(`lease:${i}`));
    const during = await connections();
    // The library's pool (4) and the DataSource's pool (10) at most, whatever the number held.
    assert.ok(during <= 4 + POOL, `${during} connections while holding ${HELD} locks`);
    assert.equal(locks.stats().held, HELD);
    for (const lock of held) await lock.release();
    t.diagnostic(`${during} connections of this database while holding ${HELD} lease locks`);
  });

  it('row-lock: one connection per holder; the pool guard refuses before draining the pool, sending nothing', async () => {
    const held: LockHandle[] = [];
    const before = await connections();
    // Holders may take all but one of the DataSource's connections.
    for (let i = 0; i < POOL - 1; i++) held.push(await locks.acquire(`row:${i}`, { strategy: 'row-lock' }));
    assert.ok((await connections()) >= POOL - 1, 'each row-lock holder keeps its connection');
    const trips = callerTrips(locks);
    await assert.rejects(locks.acquire('row:one-too-many', { strategy: 'row-lock' }), (error: unknown) => {
      assert.ok(error instanceof TooManyLockWaitersError, String(error));
      assert.equal(error.limit, POOL - 1);
      return true;
    });
    assert.equal(callerTrips(locks), trips, 'refused before any SQL');
    assert.deepEqual(await db.logRows('row:one-too-many'), []);
    // The pool still serves the app: a plain query runs while the holders hold.
    assert.deepEqual(await app.get(DataSource).query('SELECT 1 AS one'), [{ one: 1 }]);
    for (const lock of held) await lock.release();
    const again = await locks.acquire('row:one-too-many', { strategy: 'row-lock' });
    await again.release();
    assert.ok((await connections()) <= before + POOL, 'connections went back to the pool');
  });

  it('row-lock: at most maxRowLockWaiters (half the pool) wait in the database; one more is refused at once', async () => {
    // Waiters of one key set share one try at a time in a process (the wait queue), so the bound
    // is about different keys: another process holds six, this one waits for them.
    const other = await createLockApp(db.settings, { leaseMs: 30_000 });
    try {
      const held: LockHandle[] = [];
      for (let i = 0; i <= POOL / 2; i++) held.push(await other.locks.acquire(`row:hot:${i}`, { strategy: 'row-lock' }));
      const waiters = Array.from({ length: POOL / 2 }, (_, i) =>
        locks.acquire(`row:hot:${i}`, { strategy: 'row-lock', timeoutMs: 10_000 }).then((lock) => lock.release()),
      );
      await new Promise((r) => setTimeout(r, 300)); // let them reach the database
      const started = performance.now();
      await assert.rejects(locks.acquire(`row:hot:${POOL / 2}`, { strategy: 'row-lock', timeoutMs: 10_000 }), (error: unknown) => {
        assert.ok(error instanceof TooManyLockWaitersError, String(error));
        assert.equal(error.limit, POOL / 2);
        return true;
      });
      assert.ok(performance.now() - started < 1_000, 'refused at once, not after waiting');
      for (const lock of held) await lock.release();
      await Promise.all(waiters);
    } finally {
      await other.app.close();
    }
  });
});
