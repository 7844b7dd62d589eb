import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import mysql from 'mysql2/promise';
import { TestDatabase } from '../support/test-database.js';
import { createLockApp, eventually } from '../support/lock-app.js';
import { DbLockError, type LockHandle, LockTimeoutError, type LockService } from '../../lib/index.js';
import { GRANT_GRACE_MS } from '../../lib/strategies/lease/lease-strategy.js';
import { callerTrips, countsLockTrips } from '../support/round-trips.js';
import { appliesTo, contractSuite, gapOf } from '../support/contract-targets.js';

/**
 * Bounded waiting, under each strategy: against a held key, timeoutMs T ends in
 * LockTimeoutError no earlier than T and within T plus EPSILON_MS (one round trip and timer slack
 * on a loaded 2-core machine; a row-lock waiter also rolls its transaction back); 0 is exactly
 * one try. A caller told "timeout" never ends up holding a lock and left no live row, even when
 * its grant statement was stuck on a row lock when the deadline passed (lease: the grant runs on
 * the library pool with a server-side bound).
 *
 * Sub-second budgets matter for row-lock: its waiter waits in the server and InnoDB's
 * innodb_lock_wait_timeout counts whole seconds, so the bound is put on the statement itself.
 */
const TIMEOUTS = [0, 50, 150, 300, 1000] as const;

contractSuite('bounded-wait', 'timeouts', { postgres: true }, (target) => {
  // A lease waiter polls, a row-lock waiter waits in a locking read and rolls back on its deadline.
  const EPSILON_MS = target.capabilities.has('holder-connection') ? 250 : 200;
  const countsTrips = countsLockTrips(target);
  let db: TestDatabase;
  let holderApp: INestApplicationContext;
  let waiterApp: INestApplicationContext;
  let holderLocks: LockService;
  let waiterLocks: LockService;
  const held: LockHandle[] = [];
  before(async () => {
    db = await TestDatabase.forTarget(target);
    // No janitor: its cluster-wide lock goes through the lock path, and a tick mid-test would add to the lock round trips counted here.
    ({ app: holderApp, locks: holderLocks } = await createLockApp(db.settings, target.options({ janitor: false })));
    ({ app: waiterApp, locks: waiterLocks } = await createLockApp(db.settings, target.options({ janitor: false })));
    held.push(await holderLocks.acquire('busy'));
    held.push(await holderLocks.acquire('shared', { mode: 'read' }));
  });
  after(async () => {
    for (const lock of held) await lock.release().catch(() => undefined);
    await holderApp?.close();
    await waiterApp?.close();
    await db?.drop();
  });

  async function expectTimeout(
    locks: LockService,
    keys: string | string[],
    options: { timeoutMs: number; mode?: 'read' | 'write' },
  ): Promise<{ error: LockTimeoutError; elapsed: number; roundTrips: number }> {
    const roundTrips = callerTrips(locks);
    const started = performance.now();
    let caught: unknown;
    try {
      const lock = await locks.acquire(keys, options);
      await lock.release();
    } catch (error) {
      caught = error;
    }
    const elapsed = performance.now() - started;
    assert.ok(caught instanceof LockTimeoutError, `expected LockTimeoutError, got ${String(caught)}`);
    assert.ok(caught instanceof DbLockError);
    assert.equal(caught.name, 'LockTimeoutError');
    assert.ok(elapsed >= options.timeoutMs - 1, `gave up after ${Math.round(elapsed)} ms of ${options.timeoutMs}`);
    assert.ok(elapsed <= options.timeoutMs + EPSILON_MS, `timeout ${options.timeoutMs} ms took ${Math.round(elapsed)} ms`);
    assert.equal(caught.timeoutMs, options.timeoutMs);
    assert.ok(caught.waitedMs >= options.timeoutMs - 1, `gave up after ${caught.waitedMs} ms of ${options.timeoutMs}`);
    assert.ok(caught.waitedMs <= elapsed + 1);
    return { error: caught, elapsed, roundTrips: callerTrips(locks) - roundTrips };
  }

  // Before any writer waited on 'shared': a waiting writer holds new readers back for a while (writer preference).
  it('readers share a read-held key at once', async () => {
    const reader = await waiterLocks.acquire('shared', { mode: 'read', timeoutMs: 0 });
    await reader.release();
  });

  for (const timeoutMs of TIMEOUTS) {
    it(`timeoutMs ${timeoutMs} against a key held by another process: no earlier than ${timeoutMs} ms, within ${EPSILON_MS} ms after`, async (t) => {
      const { error, roundTrips, elapsed } = await expectTimeout(waiterLocks, 'busy', { timeoutMs });
      assert.deepEqual(error.keys, ['busy']);
      assert.equal(error.key, 'busy');
      assert.equal(error.mode, 'write');
      // One try is one grant round trip; a key not refused lately goes first to the fast grant, and
      // that refused, to the full plan that says why: two round trips, still one try.
      if (countsTrips && timeoutMs === 0)
        assert.ok(roundTrips === 1 || roundTrips === 2, `timeoutMs 0 is exactly one try (${roundTrips} round trips)`);
      else if (countsTrips) assert.ok(roundTrips >= 2, 'a waiter tries more than once');
      t.diagnostic(
        `timeoutMs ${timeoutMs}: rejected after ${elapsed.toFixed(1)} ms (+${(elapsed - timeoutMs).toFixed(1)} ms), ${roundTrips} round trips`,
      );
    });

    it(`timeoutMs ${timeoutMs} against a key held in this process`, async () => {
      const { error, roundTrips } = await expectTimeout(holderLocks, 'busy', { timeoutMs });
      assert.deepEqual(error.keys, ['busy']);
      // A live lock of this very process is known to conflict: the try is answered locally, no SQL.
      if (countsTrips) assert.equal(roundTrips, 0, 'a local holder is known: no doomed grant is sent');
    });

    it(`timeoutMs ${timeoutMs} for a write lock on a read-held key, several keys`, async () => {
      const { error } = await expectTimeout(waiterLocks, ['zz-free', 'shared'], { timeoutMs });
      assert.deepEqual(error.keys, ['shared', 'zz-free'], 'keys in the global lock order');
      assert.equal(error.mode, 'write');
      assert.deepEqual(await db.logRows('zz-free'), [], 'all-or-nothing: the free key was not taken');
    });
  }

  it('a read lock waiting for a writer reports mode read', async () => {
    const { error } = await expectTimeout(waiterLocks, 'busy', { timeoutMs: 50, mode: 'read' });
    assert.equal(error.mode, 'read');
  });

  it('waiters queued behind a longer waiter still time out on their own deadline', async () => {
    const long = expectTimeout(waiterLocks, 'busy', { timeoutMs: 1000 });
    const short = expectTimeout(waiterLocks, 'busy', { timeoutMs: 50 });
    const zero = expectTimeout(waiterLocks, 'busy', { timeoutMs: 0 });
    await Promise.all([long, short, zero]);
  });

  it('tryAcquire returns null at once, in one round trip', async () => {
    const before = callerTrips(waiterLocks);
    const started = performance.now();
    assert.equal(await waiterLocks.tryAcquire('busy'), null);
    assert.ok(performance.now() - started < EPSILON_MS);
    if (countsTrips) assert.equal(callerTrips(waiterLocks) - before, 1);
  });

  it('after all those timeouts the waiter holds nothing, no live row but the holder’s, and the key passes on release', async () => {
    const rows = await db.logRows('busy');
    if (target.capabilities.has('holder-connection')) {
      // A row-lock writes its audit row in its commit: neither the holder nor any waiter has one yet.
      assert.deepEqual(rows, []);
    } else {
      assert.equal(rows.filter((r) => r.status === 'ACQUIRED' || r.status === 'COMPLETED').length, 1);
    }
    assert.equal(waiterLocks.stats().held, 0);
    const next = waiterLocks.acquire('busy', { timeoutMs: 5_000 });
    await held.shift()!.release();
    const lock = await next;
    assert.equal(lock.fencingToken, 2);
    await lock.release();
  });

  if (!appliesTo('bounded-wait-blocked-grant', target)) return;
  it(
    'a caller told "timeout" while its grant was blocked on a row lock never ends up holding the lock',
    { skip: gapOf('bounded-wait-blocked-grant', target) },
    async (t) => {
      const key = 'blocked';
      // Held first by another process: the waiter does not know the key free, so its grant decides on the key row.
      const first = await holderLocks.acquire(key);
      await first.release();
      const admin = await mysql.createConnection(db.settings);
      try {
        await admin.query('START TRANSACTION');
        await admin.query('SELECT * FROM db_lock WHERE lock_key = ? FOR UPDATE', [Buffer.from(key)]);
        const timeoutMs = 100;
        const started = performance.now();
        await assert.rejects(waiterLocks.acquire(key, { timeoutMs }), (error: unknown) => {
          assert.ok(error instanceof LockTimeoutError, `expected LockTimeoutError, got ${String(error)}`);
          assert.deepEqual(error.keys, [key]);
          assert.equal(error.timeoutMs, timeoutMs);
          return true;
        });
        const elapsed = performance.now() - started;
        assert.ok(elapsed <= timeoutMs + GRANT_GRACE_MS + EPSILON_MS, `took ${Math.round(elapsed)} ms`);
        t.diagnostic(`blocked grant gave up after ${Math.round(elapsed)} ms (bound ${timeoutMs} + ${GRANT_GRACE_MS} + ${EPSILON_MS})`);
      } finally {
        await admin.query('ROLLBACK');
        await admin.end();
      }
      // Wait until no statement of the abandoned attempt is still running on the server (a grant that
      // only timed out on the client would go on and commit right after the row lock was released) ...
      await eventually(
        async () => {
          const running = await db.query(
            `SELECT id FROM information_schema.PROCESSLIST WHERE db = ? AND id <> CONNECTION_ID() AND info LIKE '%db_lock%'`,
            [db.name],
          );
          return running.length === 0;
        },
        5_000,
        'the abandoned grant statement to end',
      );
      // ... then: it left no live row, and nobody holds the key.
      const rows = await db.logRows(key);
      assert.deepEqual(
        rows.filter((r) => r.status === 'ACQUIRED' || r.status === 'COMPLETED'),
        [],
      );
      const info = await waiterLocks.inspect(key);
      assert.deepEqual(info.holders, []);
      const next = await waiterLocks.tryAcquire(key);
      assert.ok(next, 'the key is free after the abandoned attempt');
      await next.release();
      assert.equal(waiterLocks.stats().held, 0);
    },
  );
});
