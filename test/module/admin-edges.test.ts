/**
 * The admin surface (inspect, listLocks, forceRelease) at its edges (an expired holder, concurrent
 * evictions, a waiter in the evicted holder's process, inspect's counter after a reap), against what README and
 * docs/guide/operations.md promise. Scenario functions for workers are exported from this file;
 * the tests register only in the parent (workers have DB_LOCK_WORKER set).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import { createLockApp } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';
import { LockWorker } from '../support/worker-host.js';
import type { WorkerContext } from '../support/lock-worker.js';
import { LockLostError, type DbLockModuleOptions, type LockService } from '../../lib/index.js';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const self = import.meta.url;

// ---------------------------------------------------------------- worker scenarios

/** Acquires keys (any shape) and keeps them until killed; emits 'held'. */
export async function keep(ctx: WorkerContext<{ keys: unknown; leaseMs: number; mode?: 'read' | 'write' }>): Promise<void> {
  const lock = await ctx.locks.acquire(ctx.args.keys as string, { leaseMs: ctx.args.leaseMs, timeoutMs: 10_000, mode: ctx.args.mode });
  ctx.emit('held', { tokens: lock.fencingTokens, token: lock.fencingToken });
  await new Promise(() => undefined);
}

/** Holds `key`, then a second caller of this process waits for it; reports the waiter's outcome and the holder's signal. */
export async function holdAndWaitHere(
  ctx: WorkerContext<{ key: string; leaseMs: number; timeoutMs: number }>,
): Promise<{ gotAt?: number; error?: string; holderAbortedAt?: number }> {
  const lock = await ctx.locks.acquire(ctx.args.key, { leaseMs: ctx.args.leaseMs });
  let holderAbortedAt: number | undefined;
  lock.signal.addEventListener('abort', () => (holderAbortedAt = Date.now()));
  const waiting = ctx.locks.acquire(ctx.args.key, { timeoutMs: ctx.args.timeoutMs });
  ctx.emit('held', { token: lock.fencingToken });
  try {
    const second = await waiting;
    const gotAt = Date.now();
    await second.release();
    return { gotAt, holderAbortedAt };
  } catch (error) {
    return { error: (error as Error).name, holderAbortedAt };
  } finally {
    await lock.release().catch(() => undefined);
  }
}

// ---------------------------------------------------------------- tests

/** One app (with `options`) on a throw-away database for a describe block, and the workers its tests start. */
function adminEnv(options: DbLockModuleOptions): { db: TestDatabase; app: INestApplicationContext; locks: LockService; workers: LockWorker[] } {
  const env = { workers: [] as LockWorker[] } as { db: TestDatabase; app: INestApplicationContext; locks: LockService; workers: LockWorker[] };
  before(async () => {
    env.db = await TestDatabase.create();
    ({ app: env.app, locks: env.locks } = await createLockApp(env.db.settings, options));
  });
  after(async () => {
    await Promise.all(env.workers.map((w) => w.kill()));
    await env.app?.close();
    await env.db?.drop();
  });
  return env;
}

if (!process.env.DB_LOCK_WORKER) {
  describe('forceRelease at its edges (lease)', () => {
    const options = { namespace: 'hadm', janitor: false as const };
    const env = adminEnv(options);

    it('forceRelease of a key whose holder died and whose lease ran out: free, so nothing to evict; the row ends EXPIRED by the next grant', async () => {
      const worker = await LockWorker.start({ settings: env.db.settings, options });
      env.workers.push(worker);
      await new Promise<void>(
        (resolve) => void worker.run(self, 'keep', { keys: 'dead', leaseMs: 300 }, (e) => e === 'held' && resolve()).catch(() => undefined),
      );
      await worker.kill();
      await sleep(700);
      const info = await env.locks.inspect('dead');
      assert.equal(info.holders.length, 0, 'inspect: no live holder');
      assert.equal((await env.locks.listLocks()).locks.filter((l) => l.key === 'dead').length, 0);
      const evicted = await env.locks.forceRelease('dead', 'cleanup');
      const row = (await env.db.logRows('hadm:dead'))[0]!;
      assert.deepEqual(
        evicted.map((h) => h.fencingToken),
        [],
        `the key was free (its only holder expired): nothing evicted; its row now ${String(row.status)} '${String(row.note)}', stats().forceReleased ${env.locks.stats().forceReleased}`,
      );
    });

    it("extend() of a lock force-released by another process says it was force-released, with the operator's reason, not a takeover", async () => {
      const lock = await env.locks.acquire('adm:extend-forced');
      // Evicted by another running service (an operator's process), which has no local handle to abort.
      const ops = await createLockApp(env.db.settings, options);
      try {
        assert.equal((await ops.locks.forceRelease('adm:extend-forced', 'stuck batch job evicted by ops')).length, 1);
      } finally {
        await ops.app.close();
      }
      assert.equal(lock.signal.aborted, false, 'nothing told the holder yet');
      await assert.rejects(lock.extend(), (error: unknown) => {
        assert.ok(error instanceof LockLostError, String(error));
        assert.match(error.reason, /stuck batch job evicted by ops/);
        assert.doesNotMatch(error.reason, /lease ran out|took it over/);
        return true;
      });
      assert.equal(lock.signal.aborted, true, 'the holder hears of the loss through its signal');
    });

    it("forceRelease from another process: a waiter in the evicted holder's own process gets the key (it is free at once)", async () => {
      const worker = await LockWorker.start({ settings: env.db.settings, options });
      env.workers.push(worker);
      let held!: () => void;
      const isHeld = new Promise<void>((r) => (held = r));
      const run = worker.run<{ gotAt?: number; error?: string; holderAbortedAt?: number }>(
        self,
        'holdAndWaitHere',
        { key: 'local-wait', leaseMs: 30_000, timeoutMs: 5_000 },
        (e) => e === 'held' && held(),
      );
      await isHeld;
      await sleep(300);
      const evicted = await env.locks.forceRelease('local-wait', 'stuck');
      const evictedAt = Date.now();
      assert.equal(evicted.length, 1);
      const result = await run;
      assert.ok(result.gotAt !== undefined, `waiter in the holder's process: ${JSON.stringify(result)} (lease 30 s, renewal every 10 s)`);
      assert.ok(result.gotAt - evictedAt < 2_000, `got it ${result.gotAt - evictedAt} ms after the eviction`);
    });

    it('concurrent forceRelease calls with the same reason, their UPDATEs queued behind a row lock: one eviction reported', async () => {
      const holder = await env.locks.acquire('dup2', { leaseMs: 30_000 });
      const session = await env.db.session();
      await session.query('START TRANSACTION');
      await session.query('SELECT id FROM db_lock_log WHERE lock_key = ? FOR UPDATE', [Buffer.from('hadm:dup2')]);
      const before = env.locks.stats().forceReleased;
      const calls = Promise.all([env.locks.forceRelease('dup2', 'same reason'), env.locks.forceRelease('dup2', 'same reason')]);
      await env.db.transactionsUntil((them) => them.filter((t) => t.lockWait).length >= 2, 3_000);
      await session.query('COMMIT');
      const [a, b] = await calls;
      assert.equal(holder.signal.aborted, true);
      await holder.release().catch(() => undefined);
      assert.equal(a.length + b.length, 1, `one holder evicted, reported by ${a.length} + ${b.length} calls`);
      assert.equal(env.locks.stats().forceReleased - before, 1, 'stats().forceReleased counts holders evicted');
    });
  });

  describe('inspect(): the fencing counter after a reap', () => {
    const env = adminEnv({ namespace: 'hrl', strategy: 'row-lock', janitor: { intervalMs: 3_600_000, idleKeyMs: 0 } });

    it('inspect().fencingToken is the token of the latest grant, also after the janitor reaped the idle key row', async () => {
      let last = 0;
      for (let i = 0; i < 3; i++) last = await env.locks.withLock('tok', async (lock) => lock.fencingToken);
      assert.equal((await env.locks.inspect('tok')).fencingToken, last, 'before the reap');
      await sleep(20);
      const report = await env.locks.runJanitor();
      assert.ok(report.ran);
      const reaped = await env.db.query<{ n: number }[]>('SELECT COUNT(*) AS n FROM db_lock WHERE lock_key = ?', [Buffer.from('hrl:tok')]);
      const info = await env.locks.inspect('tok');
      const next = await env.locks.withLock('tok', async (lock) => lock.fencingToken);
      assert.ok(next > last, `tokens keep growing: ${next} after ${last}`);
      assert.equal(
        info.fencingToken,
        last,
        `inspect after the reap (key rows left: ${reaped[0]!.n}, reaped keys ${report.reapedKeys}): "the token of its latest grant (0 if never granted)"`,
      );
    });

    it('lease: inspect().fencingToken after a dead holder was reclaimed and its idle key row reaped', async () => {
      const worker = await LockWorker.start({ settings: env.db.settings, options: { namespace: 'hrl', janitor: false } });
      env.workers.push(worker);
      let held!: (t: number) => void;
      const isHeld = new Promise<number>((r) => (held = r));
      void worker
        .run(self, 'keep', { keys: 'ltok', leaseMs: 300 }, (e, d) => e === 'held' && held((d as { token: number }).token))
        .catch(() => undefined);
      const token = await isHeld;
      assert.equal((await env.locks.inspect('ltok')).fencingToken, token, 'before');
      await worker.kill();
      await sleep(700);
      const report = await env.locks.runJanitor();
      const info = await env.locks.inspect('ltok');
      assert.equal(info.fencingToken, token, `after the janitor (reclaimed ${report.reclaimed}, reaped keys ${report.reapedKeys})`);
    });
  });
}
