import 'reflect-metadata';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { TestDatabase } from '../support/test-database.js';
import { createLockApp } from '../support/lock-app.js';
import { TooManyLockWaitersError, type LockEvent } from '../../lib/index.js';

/** stats() and events of row-lock callers queued for a connection slot, timed out, or refused by maxRowLockWaiters. */
describe('row-lock slot queue in stats and events', () => {
  let db: TestDatabase;
  before(async () => {
    db = await TestDatabase.create();
  });
  after(async () => {
    await db?.drop();
  });

  it('queued callers count as waiting; their timeouts count once; TooManyLockWaitersError is not a timeout', async () => {
    const events: LockEvent[] = [];
    const { app, locks } = await createLockApp(
      db.settings,
      { strategy: 'row-lock', janitor: false, maxRowLockWaiters: 3, onEvent: (e: LockEvent) => void events.push(e) },
      { poolSize: 2 },
    );
    try {
      for (const k of ['st:h', 'st:1', 'st:2', 'st:3', 'st:4']) await locks.withLock(k, async () => undefined);
      const base = locks.stats();
      events.length = 0;
      const holder = await locks.acquire('st:h');
      const queued = [1, 2, 3].map((i) => locks.acquire(`st:${i}`, { timeoutMs: 400 }).catch((e: Error) => e.name));
      await new Promise((r) => setTimeout(r, 50));
      const during = locks.stats();
      const refused = await locks.acquire('st:4', { timeoutMs: 400 }).catch((e: Error) => e);
      assert.ok(refused instanceof TooManyLockWaitersError, `4th queued caller: ${String(refused)}`);
      assert.equal(during.waiting, 3, `stats().waiting with 3 callers queued for a slot: ${during.waiting}`);
      const outcomes = await Promise.all(queued);
      assert.deepEqual(outcomes, ['LockTimeoutError', 'LockTimeoutError', 'LockTimeoutError']);
      const after = locks.stats();
      assert.equal(
        after.timedOut - base.timedOut,
        3,
        `timedOut grew by ${after.timedOut - base.timedOut}, expected 3 (the refused caller is not a timeout)`,
      );
      assert.equal(after.waiting, 0, `stats().waiting after all settled: ${after.waiting}`);
      const timedOutEvents = events.filter((e) => e.type === 'timed-out');
      assert.equal(timedOutEvents.length, 3, `timed-out events: ${JSON.stringify(events.map((e) => e.type))}`);
      await holder.release();
    } finally {
      await app.close();
    }
  });
});
