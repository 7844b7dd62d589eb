import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import { DB_LOCK_DEFAULTS, LockTimeoutError, type LockHandle, type LockService } from '../../lib/index.js';
import { GRANT_GRACE_MS } from '../../lib/strategies/lease/lease-strategy.js';
import { createLockApp } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';
import { contractSuite } from '../support/contract-targets.js';

/**
 * Bounded waiting (README: "a caller gets the lock or a typed error within its timeout"; "sub-second
 * budgets hold"), while other lease callers of the same process wait on keys a row-lock holder keeps
 * (mixed strategies on a key are supported: "a lease caller waits for as long as the row-lock
 * transaction is open"). Those waiters' grants wait in the server on the keys' row locks, each on a
 * connection of the library's pool. A caller of an unrelated, free key with timeoutMs 150 must still
 * get its lock, or LockTimeoutError, within its budget plus the documented grace (GRANT_GRACE_MS)
 * and the timeouts suite's margin (200 ms on a loaded 2-core machine): never a lock handed over
 * seconds after its caller's deadline, never an answer seconds late.
 */
const POOL_SIZE = DB_LOCK_DEFAULTS.poolSize;
/** Twice the shared connections: every one of them is busy with a blocked grant, and as many queue behind. */
const BLOCKED_KEYS = 2 * (POOL_SIZE - 1);
const TIMEOUT_MS = 150;
const EPSILON_MS = 200;

contractSuite(
  'mixed-strategies',
  'a sub-second lease budget while the library pool is busy with grants blocked on row-lock holders',
  { postgres: true },
  (target) => {
    let db: TestDatabase;
    let rowLock: { app: INestApplicationContext; locks: LockService };
    let lease: { app: INestApplicationContext; locks: LockService };
    before(async () => {
      db = await TestDatabase.forTarget(target);
      rowLock = await createLockApp(db.settings, { strategy: 'row-lock', janitor: false });
      lease = await createLockApp(db.settings, { strategy: 'lease', janitor: false });
    });
    after(async () => {
      await lease?.app.close();
      await rowLock?.app.close();
      await db?.drop();
    });

    /** Runs `call` while every shared connection of the lease process is busy with a grant blocked on a row-lock holder's key. */
    async function whileGrantsBlocked<T>(call: () => Promise<T>): Promise<{ outcome: string; elapsed: number; cause?: unknown }> {
      const keys = Array.from({ length: BLOCKED_KEYS }, (_, i) => `rl:${i}`);
      // One row-lock holder (one DataSource connection) keeps every key's row lock.
      const holder: LockHandle = await rowLock.locks.acquire(keys, { timeoutMs: 5_000 });
      const waiters = keys.map((key) =>
        lease.locks.acquire(key, { timeoutMs: 6_000 }).then(
          (lock) => lock.release(),
          () => undefined,
        ),
      );
      try {
        // Let the waiters' grants reach the server and block there.
        await new Promise((r) => setTimeout(r, 150));
        const started = performance.now();
        try {
          const result = await call();
          return { outcome: result === null ? 'null' : 'granted', elapsed: performance.now() - started };
        } catch (error) {
          const outcome = error instanceof LockTimeoutError ? 'LockTimeoutError' : `unexpected ${String(error)}`;
          return { outcome, elapsed: performance.now() - started, cause: (error as Error).cause };
        }
      } finally {
        await holder.release();
        await Promise.all(waiters);
      }
    }

    it(`timeoutMs ${TIMEOUT_MS} on a free key answers within ${TIMEOUT_MS} + ${GRANT_GRACE_MS} + ${EPSILON_MS} ms`, async (t) => {
      // The free key is known to the lease process (used once), as a hot key of the app would be.
      await (await lease.locks.acquire('free', { timeoutMs: 5_000 })).release();
      const { outcome, elapsed, cause } = await whileGrantsBlocked(async () => {
        const lock = await lease.locks.acquire('free', { timeoutMs: TIMEOUT_MS });
        await lock.release();
        return lock;
      });
      t.diagnostic(`timeoutMs ${TIMEOUT_MS} on a free key: ${outcome} after ${Math.round(elapsed)} ms; cause: ${String(cause)}`);
      assert.ok(outcome === 'granted' || outcome === 'LockTimeoutError', outcome);
      assert.ok(
        elapsed <= TIMEOUT_MS + GRANT_GRACE_MS + EPSILON_MS,
        `timeoutMs ${TIMEOUT_MS}: ${outcome} only after ${Math.round(elapsed)} ms (bound ${TIMEOUT_MS + GRANT_GRACE_MS + EPSILON_MS} ms)`,
      );
    });

    it(`tryAcquire of a free key answers at once (within ${GRANT_GRACE_MS} + ${EPSILON_MS} ms)`, async (t) => {
      await (await lease.locks.acquire('free-try', { timeoutMs: 5_000 })).release();
      const { outcome, elapsed, cause } = await whileGrantsBlocked(async () => {
        const lock = await lease.locks.tryAcquire('free-try');
        await lock?.release();
        return lock;
      });
      t.diagnostic(`tryAcquire of a free key: ${outcome} after ${Math.round(elapsed)} ms; cause: ${String(cause)}`);
      assert.ok(outcome === 'granted' || outcome === 'null' || outcome === 'LockTimeoutError', outcome);
      assert.ok(elapsed <= GRANT_GRACE_MS + EPSILON_MS, `tryAcquire: ${outcome} only after ${Math.round(elapsed)} ms`);
    });
  },
);
