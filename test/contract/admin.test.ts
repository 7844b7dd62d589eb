import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import { createLockApp } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';
import { LockWorker } from '../support/worker-host.js';
import { DbLockOptionsError, InvalidLockKeyError, type LockService } from '../../lib/index.js';
import { callerTrips } from '../support/round-trips.js';
import { contractSuite, gapOf } from '../support/contract-targets.js';

const scenarios = new URL('./scenarios/liveness.js', import.meta.url).href;

contractSuite('admin', 'admin: listLocks and forceRelease', { postgres: true }, (target) => {
  let db: TestDatabase;
  let app: INestApplicationContext;
  let locks: LockService;
  let workers: LockWorker[] = [];
  before(async () => {
    db = await TestDatabase.forTarget(target);
    ({ app, locks } = await createLockApp(db.settings, target.options({ namespace: 'adm', janitor: false })));
  });
  after(async () => {
    await Promise.all(workers.map((w) => w.close()));
    await app?.close();
    await db?.drop();
  });

  it('listLocks pages through the live holders of its namespace, with server times', async () => {
    const [same, other] = (workers = await Promise.all([
      LockWorker.start({ settings: db.settings, options: target.options({ namespace: 'adm', janitor: false }) }),
      LockWorker.start({ settings: db.settings, options: target.options({ namespace: 'other', janitor: false }) }),
    ])) as [LockWorker, LockWorker];
    await same.run(scenarios, 'holdKeys', { keys: ['a1', 'a2', 'a3'], leaseMs: 5000 });
    await other.run(scenarios, 'holdKeys', { keys: ['a1'], leaseMs: 5000 }); // another namespace: not listed
    const mine = await locks.acquire('p1', { mode: 'read', leaseMs: 5000 });

    const first = await locks.listLocks({ limit: 2 });
    assert.equal(first.locks.length, 2);
    assert.ok(first.next);
    const second = await locks.listLocks({ limit: 2, after: first.next });
    assert.equal(second.next, null);
    const all = [...first.locks, ...second.locks];
    assert.deepEqual(
      all.map((l) => l.key),
      ['a1', 'a2', 'a3', 'p1'],
    );
    for (const entry of all) {
      assert.ok(entry.expiresAt > first.serverTime || entry.expiresAt > second.serverTime);
      assert.ok(entry.remainingMs > 0 && entry.remainingMs <= 5000, `remaining ${entry.remainingMs}`);
      assert.ok(entry.heldMs >= 0);
      assert.equal(entry.leaseMs, 5000);
    }
    assert.equal(all[3]!.mode, 'read');
    assert.match(all[0]!.holder, new RegExp(`:${same.pid}$`));
    assert.match(all[3]!.holder, new RegExp(`:${process.pid}$`));
    assert.equal((await locks.listLocks()).locks.length, 4);
    await mine.release();
  });

  // Under row-lock the remote holder's lock is its open transaction on its own connection.
  it(
    'forceRelease evicts a holder in another process: reason in the log, its signal aborts, the key is free at once',
    { skip: gapOf('admin-evict-remote', target) },
    async () => {
      const worker = await LockWorker.start({ settings: db.settings, options: target.options({ namespace: 'adm', janitor: false }) });
      workers.push(worker);
      let onHolding!: (d: { token: number }) => void;
      const holding = new Promise<{ token: number }>((r) => (onHolding = r));
      const run = worker.run<{ aborted: boolean; reason: string; withLockError: string | null; withLockMessage: string | null }>(
        scenarios,
        'holdUntilAborted',
        { key: ['f1', 'f2'], leaseMs: 30_000, maxMs: 15_000 },
        (event, data) => event === 'holding' && onHolding(data as { token: number }),
      );
      const { token } = await holding;
      const evicted = await locks.forceRelease('f1', 'stuck batch job');
      assert.equal(evicted.length, 1);
      assert.equal(evicted[0]!.mode, 'write');
      assert.equal(evicted[0]!.fencingToken, token);
      assert.match(evicted[0]!.holder, new RegExp(`:${worker.pid}$`));
      // Free at once (its lease had 30 s left).
      const next = await locks.tryAcquire('f1');
      assert.ok(next, 'the key is free at once');
      assert.equal(next.fencingToken, token + 1);
      await next.release();
      const result = await run;
      assert.equal(result.aborted, true, "the evicted holder's signal aborted");
      assert.match(result.reason, /ended by someone else|force-released/);
      assert.equal(result.withLockError, 'LockLostError', 'its release reports the loss');
      assert.match(String(result.withLockMessage), /force-released: stuck batch job/);
      for (const key of ['adm:f1', 'adm:f2']) {
        const rows = await db.logRows(key);
        assert.equal(rows[0]!.status, 'RELEASED');
        assert.equal(rows[0]!.note, 'force-released: stuck batch job', `${key}: every key of the acquisition`);
      }
      assert.equal(locks.stats().forceReleased, 1);
    },
  );

  it('forceRelease of a holder in this process aborts its signal at once', async () => {
    const lock = await locks.acquire('loc');
    const evicted = await locks.forceRelease('loc', 'operator drill');
    assert.equal(evicted.length, 1);
    assert.equal(lock.signal.aborted, true);
    await assert.rejects(lock.release(), (e: Error) => e.name === 'LockLostError' && /force-released: operator drill/.test(e.message));
    assert.deepEqual(await locks.forceRelease('loc', 'again'), [], 'a free key has no holder to evict');
  });

  it('rejects bad arguments before any SQL', async () => {
    const trips = callerTrips(locks);
    await assert.rejects(locks.forceRelease(42 as never, 'r'), InvalidLockKeyError);
    await assert.rejects(locks.forceRelease(['a'] as never, 'r'), InvalidLockKeyError);
    await assert.rejects(locks.forceRelease('', 'r'), InvalidLockKeyError);
    await assert.rejects(locks.forceRelease('k', ''), DbLockOptionsError);
    await assert.rejects(locks.forceRelease('k', 'x'.repeat(201)), DbLockOptionsError);
    await assert.rejects(locks.forceRelease('k', undefined as never), DbLockOptionsError);
    await assert.rejects(locks.listLocks({ limit: 0 }), DbLockOptionsError);
    await assert.rejects(locks.listLocks({ limit: 10_001 }), DbLockOptionsError);
    await assert.rejects(locks.listLocks({ after: "1' OR 1=1" }), DbLockOptionsError);
    await assert.rejects(locks.listLocks({ page: 2 } as never), DbLockOptionsError);
    assert.equal(callerTrips(locks), trips);
  });
});
