import 'reflect-metadata';
import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { TestDatabase } from '../support/test-database.js';
import { LockWorker } from '../support/worker-host.js';
import type { WorkerContext } from '../support/lock-worker.js';
import { contractSuite } from '../support/contract-targets.js';

/**
 * One try (onLocked 'skip', whose default budget is 0, or timeoutMs: 0) on keys nobody holds must
 * be granted: "timeoutMs 0 = one try". Six scheduled jobs on six different, free keys fire at the
 * same moment in a freshly started process (as @Cron jobs do right after a deploy); another
 * process idles beside it. Every job must run.
 */
const SELF = import.meta.url;

export async function fireJobs(ctx: WorkerContext<{ prefix: string; count: number; how: 'skip' | 'timeout0' }>): Promise<string[]> {
  const { prefix, count, how } = ctx.args;
  const keys = Array.from({ length: count }, (_, i) => `${prefix}:${i}`);
  return Promise.all(
    keys.map(async (key) => {
      if (how === 'skip') {
        const ran = await ctx.locks.runLocked(key, async () => 'ran', { onLocked: 'skip', transaction: 'none' }).catch((e: Error) => e.name);
        return ran ?? 'skipped';
      }
      return ctx.locks.acquire(key, { timeoutMs: 0 }).then(
        async (h) => {
          await h.release();
          return 'ran';
        },
        (e: Error) => `${e.name} (cause: ${String((e.cause as Error | undefined)?.message ?? e.cause)})`,
      );
    }),
  );
}

if (!process.env.DB_LOCK_WORKER) {
  contractSuite('basics', 'one try on free keys in a fresh process', { postgres: true }, (target) => {
    let db: TestDatabase;
    before(async () => {
      db = await TestDatabase.forTarget(target);
    });
    after(async () => {
      await db?.drop();
    });

    for (const how of ['skip', 'timeout0'] as const) {
      it(`${how}: 6 jobs on 6 free keys at once all run`, async () => {
        const workers = await LockWorker.startMany(2, { settings: db.settings, options: target.options({ leaseMs: 5_000, janitor: false }) });
        try {
          const outcomes = await workers[0]!.run<string[]>(SELF, 'fireJobs', { prefix: `job-${how}`, count: 6, how });
          const live = await db.query<{ n: number }[]>(`SELECT COUNT(*) AS n FROM db_lock_log WHERE lock_key LIKE ? `, [Buffer.from(`job-${how}%`)]);
          assert.deepEqual(
            outcomes,
            Array(6).fill('ran'),
            `outcomes: ${outcomes.join(' | ')}; log rows written for these keys: ${Number(live[0]!.n)}`,
          );
        } finally {
          await Promise.all(workers.map((w) => w.close()));
        }
      });
    }
  });
}
