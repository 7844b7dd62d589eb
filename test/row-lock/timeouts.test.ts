import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import { DbLockError, type LockHandle, LockTimeoutError, type LockService } from '../../lib/index.js';
import { createLockApp } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';

/**
 * Row-lock bounded waits. The waiter waits in the server (the locking read), and InnoDB's
 * innodb_lock_wait_timeout counts whole seconds, so the budget is put on the statement itself
 * (MariaDB `SET STATEMENT max_statement_time`, MySQL `MAX_EXECUTION_TIME`): a sub-second timeout
 * must end in LockTimeoutError no earlier than T and within T + EPSILON_MS (one round trip, the
 * rollback, timer slack on a loaded 2-core machine). 0 is one NOWAIT try. A caller told
 * "timeout" never holds the lock and left no live row.
 */
const EPSILON_MS = 250;
const TIMEOUTS = [0, 50, 150, 300, 1000] as const;

describe('row-lock: timeouts', () => {
  let db: TestDatabase;
  let holder: { app: INestApplicationContext; locks: LockService };
  let waiter: { app: INestApplicationContext; locks: LockService };
  const held: LockHandle[] = [];
  before(async () => {
    db = await TestDatabase.create();
    holder = await createLockApp(db.settings, { strategy: 'row-lock' });
    waiter = await createLockApp(db.settings, { strategy: 'row-lock' });
    held.push(await holder.locks.acquire('busy'));
    held.push(await holder.locks.acquire('shared', { mode: 'read' }));
  });
  after(async () => {
    for (const lock of held) await lock.release().catch(() => undefined);
    await holder?.app.close();
    await waiter?.app.close();
    await db?.drop();
  });

  async function expectTimeout(keys: string | string[], options: { timeoutMs: number; mode?: 'read' | 'write' }): Promise<number> {
    const started = performance.now();
    let caught: unknown;
    try {
      const lock = await waiter.locks.acquire(keys, options);
      await lock.release();
    } catch (error) {
      caught = error;
    }
    const elapsed = performance.now() - started;
    assert.ok(caught instanceof LockTimeoutError, `expected LockTimeoutError, got ${String(caught)}`);
    assert.ok(caught instanceof DbLockError);
    assert.ok(elapsed >= options.timeoutMs - 1, `gave up after ${Math.round(elapsed)} ms of ${options.timeoutMs}`);
    assert.ok(elapsed <= options.timeoutMs + EPSILON_MS, `timeout ${options.timeoutMs} ms took ${Math.round(elapsed)} ms`);
    return elapsed;
  }

  for (const timeoutMs of TIMEOUTS) {
    it(`timeoutMs ${timeoutMs}: LockTimeoutError no earlier than the timeout and within ${EPSILON_MS} ms after it`, async (t) => {
      const elapsed = await expectTimeout('busy', { timeoutMs });
      t.diagnostic(`timeoutMs ${timeoutMs}: rejected after ${elapsed.toFixed(1)} ms (+${(elapsed - timeoutMs).toFixed(1)} ms)`);
    });
  }

  it('a writer on a read-held key times out, and the free key of the same call was not taken', async () => {
    await expectTimeout(['zz-free', 'shared'], { timeoutMs: 150 });
    assert.deepEqual(await db.logRows('zz-free'), [], 'all-or-nothing: the free key was not taken');
  });

  it('readers share a read-held key at once', async () => {
    const reader = await waiter.locks.acquire('shared', {
      mode: 'read',
      timeoutMs: 0,
    });
    await reader.release();
  });

  it('tryAcquire returns null at once', async () => {
    const started = performance.now();
    assert.equal(await waiter.locks.tryAcquire('busy'), null);
    assert.ok(performance.now() - started < EPSILON_MS);
  });

  it('after all those timeouts the waiter holds nothing, no live row but the holder’s, and the key passes on release', async () => {
    const live = (await db.logRows('busy')).filter((r) => r.status === 'ACQUIRED' || r.status === 'COMPLETED');
    assert.equal(live.length, 1);
    assert.equal(waiter.locks.stats().held, 0);
    const next = waiter.locks.acquire('busy', { timeoutMs: 5_000 });
    await held.shift()!.release();
    const lock = await next;
    assert.equal(lock.fencingToken, 2);
    await lock.release();
  });
});
