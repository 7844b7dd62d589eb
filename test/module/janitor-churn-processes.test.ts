/**
 * Tokens under janitors that keep nothing (logRetentionMs 0, idleKeyMs 0) running every 100 ms in
 * three processes, while those processes take a few keys over and over with both strategies: key rows
 * are reaped between holds and come back from the fencing floor, ended rows are pruned right after.
 * operations.md: tokens "jump, never go back"; one holder at a time. Per key, the holds (from every
 * process, on one machine's monotonic clock) never overlap and their tokens strictly increase in hold order.
 */
import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { TestDatabase } from '../support/test-database.js';
import { LockWorker } from '../support/worker-host.js';
import type { WorkerContext } from '../support/lock-worker.js';
import { contractSuite } from '../support/contract-targets.js';

type Hold = { key: string; token: number; from: number; to: number };

/** Worker: takes the keys in turn for `ms`, recording each hold. */
export async function churn(ctx: WorkerContext<{ keys: string[]; ms: number }>): Promise<{ holds: Hold[]; errors: string[] }> {
  const holds: Hold[] = [];
  const errors: string[] = [];
  const end = performance.now() + ctx.args.ms;
  // CLOCK_MONOTONIC, one clock for every process of the machine. performance.timeOrigin is the
  // wall clock read at each process's start: a step of it between two workers' starts shifts one
  // worker's readings against another's. A fresh-clone run read overlaps of 0.3–2.6 ms with the
  // tokens in reverse order, which is what such a shift of a few milliseconds looks like.
  const now = () => Number(process.hrtime.bigint()) / 1e6;
  let i = 0;
  while (performance.now() < end) {
    const key = ctx.args.keys[i++ % ctx.args.keys.length]!;
    try {
      const h = await ctx.locks.acquire(key, { timeoutMs: 3_000, strategy: key.startsWith('rl:') ? 'row-lock' : 'lease' });
      const from = now();
      await new Promise((r) => setTimeout(r, Math.random() * 4));
      const to = now();
      await h.release();
      holds.push({ key, token: h.fencingToken, from, to });
    } catch (e) {
      errors.push(`${(e as Error).name}: ${(e as Error).message}`);
    }
    await new Promise((r) => setTimeout(r, Math.random() * 15));
  }
  return { holds, errors };
}

export async function janitorStats(ctx: WorkerContext): Promise<unknown> {
  return ctx.locks.stats().janitor;
}

const SELF = import.meta.url;

if (!process.env.DB_LOCK_WORKER)
  contractSuite('lease-janitor', 'tokens under janitors that prune and reap between holds', { postgres: true }, (target) => {
    let db: TestDatabase;
    let workers: LockWorker[] = [];
    before(async () => {
      db = await TestDatabase.forTarget(target);
    });
    after(async () => {
      await Promise.all(workers.map((w) => w.kill()));
      await db?.drop();
    });

    it('per key: one holder at a time, tokens strictly increasing, across reaps and prunes in three processes', async () => {
      workers = await LockWorker.startMany(3, {
        settings: db.settings,
        options: target.options({ leaseMs: 2_000, janitor: { intervalMs: 100, logRetentionMs: 0, idleKeyMs: 0, batchSize: 3 } }),
      });
      const keys = ['rl:a', 'rl:b', 'rl:c', 'ls:a', 'ls:b'];
      const results = await Promise.all(workers.map((w) => w.run<{ holds: Hold[]; errors: string[] }>(SELF, 'churn', { keys, ms: 7_000 })));
      const stats = await Promise.all(workers.map((w) => w.run<{ pruned: number; reapedKeys: number }>(SELF, 'janitorStats')));
      const holds = results.flatMap((r) => r.holds);
      const errors = results.flatMap((r) => r.errors);
      const problems: string[] = [];
      for (const key of keys) {
        const list = holds.filter((h) => h.key === key).sort((a, b) => a.from - b.from);
        for (let i = 1; i < list.length; i++) {
          const [p, c] = [list[i - 1]!, list[i]!];
          if (c.from < p.to) problems.push(`${key}: holds overlap (${p.token} until ${p.to.toFixed(1)}, ${c.token} from ${c.from.toFixed(1)})`);
          if (!(c.token > p.token)) problems.push(`${key}: token ${c.token} after ${p.token}`);
        }
      }
      const reaped = stats.reduce((n, s) => n + s.reapedKeys, 0);
      const pruned = stats.reduce((n, s) => n + s.pruned, 0);
      console.log(`# holds ${holds.length}, errors ${errors.length}, reaped ${reaped}, pruned ${pruned}`);
      assert.ok(reaped > 0 && pruned > 0, `the janitors reaped ${reaped} key rows and pruned ${pruned} rows`);
      assert.deepEqual(problems.slice(0, 10), [], `${problems.length} problems`);
      assert.deepEqual(errors.slice(0, 5), [], `${errors.length} errors`);
    });
  });
