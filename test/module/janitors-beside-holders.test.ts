/**
 * Live holders beside janitors that keep nothing (logRetentionMs 0, idleKeyMs 0) running every
 * 100 ms in two processes at once, while holders in two other processes keep their locks for several
 * leases: a lease writer, lease readers, semaphore permits (leases renewed by their process) and a
 * row-lock writer and reader (open transactions). operations.md: the janitor expires only rows whose
 * lease ran out, deletes only terminal rows, and reaps only idle key rows (no live holder, skipping any
 * row someone has locked); tokens never go back across a reap or a prune. Expected: every holder keeps
 * its lock (its row live, nobody else gets the key), inspect/listLocks show them, and after the
 * releases each key's next grant has a larger token than any handed out before.
 */
import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { TestDatabase } from '../support/test-database.js';
import { createLockApp } from '../support/lock-app.js';
import { LockWorker } from '../support/worker-host.js';
import type { WorkerContext } from '../support/lock-worker.js';
import type { INestApplicationContext } from '@nestjs/common';
import type { LockHandle, LockService } from '../../lib/index.js';
import { contractSuite } from '../support/contract-targets.js';

const handles = new Map<string, LockHandle>();

/** Worker: takes `key` with the given options and keeps the handle: its token. */
export async function hold(ctx: WorkerContext<{ name: string; key: string; options: Record<string, unknown>; limit?: number }>): Promise<number> {
  const { name, key, options, limit } = ctx.args;
  const h = limit === undefined ? await ctx.locks.acquire(key, options) : await ctx.locks.acquireSemaphore(key, limit, options);
  handles.set(name, h);
  return h.fencingToken;
}

/** Worker: whether the kept handle is still live (its signal not aborted), then releases it: 'ok' or the error's name. */
export async function letGo(ctx: WorkerContext<{ name: string }>): Promise<{ aborted: boolean; release: string }> {
  const h = handles.get(ctx.args.name)!;
  handles.delete(ctx.args.name);
  const aborted = h.signal.aborted;
  try {
    await h.release();
    return { aborted, release: 'ok' };
  } catch (e) {
    return { aborted, release: (e as Error).name };
  }
}

/** Worker: janitor stats. */
export async function janitorStats(ctx: WorkerContext): Promise<unknown> {
  return ctx.locks.stats().janitor;
}

const SELF = import.meta.url;

if (!process.env.DB_LOCK_WORKER)
  contractSuite('lease-janitor', 'live holders beside janitors that keep nothing', { postgres: true }, (target) => {
    let db: TestDatabase;
    let app: INestApplicationContext;
    let locks: LockService;
    const workers: LockWorker[] = [];
    before(async () => {
      db = await TestDatabase.forTarget(target);
      ({ app, locks } = await createLockApp(db.settings, target.options({ janitor: false, leaseMs: 1_000 })));
    });
    after(async () => {
      await Promise.all(workers.map((w) => w.kill()));
      await app?.close();
      await db?.drop();
    });

    it('no live holder is expired, pruned or reaped; tokens continue above every earlier one', async () => {
      const keys = ['live:lease', 'live:read', 'live:sem', 'live:rl', 'live:rlread'];
      // History first: ended rows of every key, which the janitors prune.
      const before: Record<string, number> = {};
      for (const key of keys) {
        for (let i = 0; i < 3; i++) {
          const l = await locks.acquire(key, key.startsWith('live:rl') ? { strategy: 'row-lock' } : {});
          before[key] = l.fencingToken;
          await l.release();
        }
      }
      const holdOptions = { settings: db.settings, options: target.options({ janitor: false as const, leaseMs: 2_500 }) };
      const [leases, rows] = await LockWorker.startMany(2, holdOptions);
      workers.push(leases!, rows!);
      const tokens: Record<string, number[]> = {};
      const take = async (w: LockWorker, name: string, key: string, options: Record<string, unknown>, limit?: number) => {
        (tokens[key] ??= []).push(await w.run<number>(SELF, 'hold', { name, key, options, limit }));
      };
      await take(leases!, 'w', 'live:lease', { mode: 'write' });
      await take(leases!, 'r1', 'live:read', { mode: 'read' });
      await take(leases!, 'r2', 'live:read', { mode: 'read' });
      await take(leases!, 's1', 'live:sem', {}, 2);
      await take(leases!, 's2', 'live:sem', {}, 2);
      await take(rows!, 'rl', 'live:rl', { strategy: 'row-lock', mode: 'write' });
      await take(rows!, 'rlr', 'live:rlread', { strategy: 'row-lock', mode: 'read' });

      const janitorOptions = {
        settings: db.settings,
        options: target.options({ leaseMs: 2_500, janitor: { intervalMs: 100, logRetentionMs: 0, idleKeyMs: 0, batchSize: 2 } }),
      };
      const janitors = await LockWorker.startMany(2, janitorOptions);
      workers.push(...janitors);
      await new Promise((r) => setTimeout(r, 6_000)); // over two leases, about 100 janitor runs

      const problems: string[] = [];
      for (const key of keys) {
        const other = await locks.tryAcquire(key, key.startsWith('live:rl') ? { strategy: 'row-lock' } : {});
        if (other) {
          problems.push(`${key}: granted to another process (token ${other.fencingToken}) while held`);
          await other.release();
        }
      }
      const info = await locks.inspect('live:lease');
      if (info.holders.length !== 1) problems.push(`inspect(live:lease) holders: ${info.holders.length}`);
      const listed = (await locks.listLocks({ limit: 100 })).locks.map((l) => `${l.key}:${l.mode}`).sort();
      const lease = ['live:lease:write', 'live:read:read', 'live:read:read', 'live:sem:permit', 'live:sem:permit'].sort();
      for (const l of lease) if (!listed.includes(l)) problems.push(`listLocks lacks ${l}: ${listed.join(',')}`);
      const stats = (await Promise.all(janitors.map((j) => j.run<{ runs: number; pruned: number }>(SELF, 'janitorStats')))) as {
        runs: number;
        pruned: number;
      }[];
      const pruned = stats.reduce((n, s) => n + s.pruned, 0);
      if (pruned === 0) problems.push(`the janitors pruned nothing: ${JSON.stringify(stats)}`);

      for (const [w, name] of [
        [leases!, 'w'],
        [leases!, 'r1'],
        [leases!, 'r2'],
        [leases!, 's1'],
        [leases!, 's2'],
        [rows!, 'rl'],
        [rows!, 'rlr'],
      ] as const) {
        const out = await w.run<{ aborted: boolean; release: string }>(SELF, 'letGo', { name });
        if (out.aborted || out.release !== 'ok') problems.push(`holder ${name}: ${JSON.stringify(out)}`);
      }
      await new Promise((r) => setTimeout(r, 500)); // the janitors reap the now idle keys
      for (const key of keys) {
        const l = await locks.acquire(key, key.startsWith('live:rl') ? { strategy: 'row-lock' } : {});
        const max = Math.max(before[key]!, ...tokens[key]!);
        if (!(l.fencingToken > max)) problems.push(`${key}: next token ${l.fencingToken} not above ${max}`);
        await l.release();
      }
      assert.deepEqual(problems, []);
    });
  });
