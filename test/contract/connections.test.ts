import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import { type LockHandle, type LockService, LockTimeoutError, TooManyLockWaitersError } from '../../lib/index.js';
import { createLockApp } from '../support/lock-app.js';
import { DataSource } from 'typeorm';
import { TestDatabase } from '../support/test-database.js';
import { callerTrips } from '../support/round-trips.js';
import { contractTargets } from '../support/contract-targets.js';

/**
 * What each strategy costs in connections while it holds. A lease lock holds none: any number of
 * held locks live on the library's small pool (default 4) plus the DataSource's idle ones. A
 * row-lock holds one DataSource connection per holder and per waiter in the database, at most the
 * pool minus one: callers beyond that wait in the process without a connection until one frees
 * or their budget ends (LockTimeoutError, nothing sent). maxRowLockWaiters, when set, bounds how
 * many may queue (TooManyLockWaitersError beyond it).
 */
const HELD = 200;
const POOL = 10; // the test DataSource's pool (test/support/lock-app.ts)

/** One target per server: each test names its strategy per call. */
const oneTargetPerServer = [...new Map(contractTargets().map((target) => [target.server, target])).values()];

/** Client sessions of a database other than the asking one (PostgreSQL: background workers such as autovacuum left out). */
const SESSIONS = {
  mysql: 'SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST WHERE db = ? AND id <> CONNECTION_ID()',
  postgres: "SELECT COUNT(*) AS n FROM pg_stat_activity WHERE datname = ? AND pid <> pg_backend_pid() AND backend_type = 'client backend'",
};

for (const target of oneTargetPerServer)
  describe(`connections held while holding locks [${target.server}]`, () => {
    let db: TestDatabase;
    let app: INestApplicationContext;
    let locks: LockService;
    before(async () => {
      db = await TestDatabase.forTarget(target);
      // No janitor: its cluster-wide lock goes through the lock path, and a tick mid-test would add to the lock round trips counted here.
      ({ app, locks } = await createLockApp(db.settings, { leaseMs: 30_000, janitor: false }));
    });
    after(async () => {
      await app?.close();
      await db?.drop();
    });

    async function connections(): Promise<number> {
      const [row] = await db.query<{ n: number }[]>(SESSIONS[db.type], [db.name]);
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

    it('row-lock: one connection per holder; a caller beyond the cap waits without a connection, then gets a freed one or times out sending nothing', async () => {
      const held: LockHandle[] = [];
      const before = await connections();
      // Holders may take all but one of the DataSource's connections.
      for (let i = 0; i < POOL - 1; i++) held.push(await locks.acquire(`row:${i}`, { strategy: 'row-lock' }));
      assert.ok((await connections()) >= POOL - 1, 'each row-lock holder keeps its connection');
      const trips = callerTrips(locks);
      const opened = await connections();
      assert.equal(await locks.tryAcquire('row:one-too-many', { strategy: 'row-lock' }), null, 'one try answers at once');
      const started = performance.now();
      await assert.rejects(locks.acquire('row:one-too-many', { strategy: 'row-lock', timeoutMs: 300 }), LockTimeoutError);
      const elapsed = performance.now() - started;
      assert.ok(elapsed >= 299 && elapsed < 300 + 250, `timeout 300 ms took ${Math.round(elapsed)} ms`);
      assert.equal(callerTrips(locks), trips, 'nothing sent by the library');
      assert.equal(await connections(), opened, 'no connection taken while queued');
      assert.deepEqual(await db.logRows('row:one-too-many'), []);
      // The pool still serves the app: a plain query runs while the holders hold.
      assert.deepEqual(await app.get(DataSource).query('SELECT 1 AS one'), [{ one: 1 }]);
      // A queued caller gets the connection a holder frees.
      let granted = false;
      const queued = locks.acquire('row:one-too-many', { strategy: 'row-lock', timeoutMs: 10_000 }).then((lock) => {
        granted = true;
        return lock;
      });
      await new Promise((r) => setTimeout(r, 100));
      assert.equal(granted, false, 'granted while every slot was taken');
      await held.pop()!.release();
      await (await queued).release();
      for (const lock of held) await lock.release();
      assert.ok((await connections()) <= before + POOL, 'connections went back to the pool');
    });

    it('row-lock: maxRowLockWaiters bounds the callers queued for a connection; one more is refused at once', async () => {
      const bounded = await createLockApp(db.settings, { leaseMs: 30_000, janitor: false, maxRowLockWaiters: 2 });
      try {
        const held: LockHandle[] = [];
        for (let i = 0; i < POOL - 1; i++) held.push(await bounded.locks.acquire(`row:bounded:${i}`, { strategy: 'row-lock' }));
        const queued = [0, 1].map((i) => bounded.locks.acquire(`row:queued:${i}`, { strategy: 'row-lock', timeoutMs: 10_000 }));
        const started = performance.now();
        await assert.rejects(bounded.locks.acquire('row:queued:2', { strategy: 'row-lock', timeoutMs: 10_000 }), (error: unknown) => {
          assert.ok(error instanceof TooManyLockWaitersError, String(error));
          assert.equal(error.limit, 2);
          return true;
        });
        assert.ok(performance.now() - started < 1_000, 'refused at once, not after waiting');
        for (const lock of held) await lock.release();
        for (const lock of await Promise.all(queued)) await lock.release();
      } finally {
        await bounded.app.close();
      }
    });
  });
