import 'reflect-metadata';
import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import type { INestApplicationContext } from '@nestjs/common';
import { TestDatabase } from '../support/test-database.js';
import { createLockApp } from '../support/lock-app.js';
import { LockWorker } from '../support/worker-host.js';
import type { WorkerContext } from '../support/lock-worker.js';
import type { LockService } from '../../lib/index.js';
import { contractSuite } from '../support/contract-targets.js';

/**
 * A writer waiting for a key whose permits other processes keep taking, permits
 * overlapping so that the key is never free of them. Readers in that pattern are held back by
 * writer preference (default true: "while a writer waits, new readers of that key are held back";
 * a permit "is reported with mode 'read': it is shared", and inside one process permit callers do
 * give way to a waiting writer). Compared with the same pattern of readers.
 */
const SELF = import.meta.url;

export async function churn(ctx: WorkerContext<{ key: string; kind: 'permit' | 'read'; ms: number; holdMs: number }>): Promise<number> {
  const { key, kind, ms, holdMs } = ctx.args;
  const until = performance.now() + ms;
  let entries = 0;
  const loop = async (): Promise<void> => {
    while (performance.now() < until) {
      try {
        if (kind === 'permit') await ctx.locks.withSemaphore(key, 3, () => sleep(holdMs), { timeoutMs: 2_000 });
        else await ctx.locks.withLock(key, () => sleep(holdMs), { mode: 'read', timeoutMs: 2_000 });
        entries++;
      } catch {
        await sleep(5);
      }
    }
  };
  await Promise.all([loop(), sleep(holdMs / 3).then(loop)]);
  return entries;
}

if (!process.env.DB_LOCK_WORKER) {
  contractSuite('lease-writer-preference', 'a waiting writer beside overlapping permits of other processes', { postgres: true }, (target) => {
    let db: TestDatabase;
    let workers: LockWorker[] = [];
    let app: INestApplicationContext;
    let locks: LockService;
    before(async () => {
      db = await TestDatabase.forTarget(target);
      workers = await LockWorker.startMany(2, { settings: db.settings, options: target.options({ leaseMs: 5_000, janitor: false }) });
      ({ app, locks } = await createLockApp(db.settings, target.options({ leaseMs: 5_000, janitor: false })));
    });
    after(async () => {
      await app?.close();
      await Promise.all(workers.map((w) => w.close()));
      await db?.drop();
    });

    it("control: the same permits churning in the writer's own process give way to it (in-process writer preference)", async () => {
      const key = 'starve-local';
      const churning = churn({ locks, app, settings: db.settings, args: { key, kind: 'permit', ms: 5_000, holdMs: 300 }, emit: () => undefined });
      await sleep(500);
      const started = performance.now();
      const got = await locks.acquire(key, { timeoutMs: 3_000 }).then(
        async (h) => {
          await h.release();
          return `granted after ${Math.round(performance.now() - started)} ms`;
        },
        (e: unknown) => `${(e as Error).name} after ${Math.round(performance.now() - started)} ms`,
      );
      await churning;
      assert.match(got, /^granted/, `writer beside local permits: ${got}`);
    });

    for (const kind of ['read', 'permit'] as const) {
      it(`${kind}s overlapping in 2 other processes: the writer gets in within 3 s`, async () => {
        const key = `starve-${kind}`;
        const churning = workers.map((w) => w.run<number>(SELF, 'churn', { key, kind, ms: 5_000, holdMs: 300 }));
        await sleep(500);
        const started = performance.now();
        const got = await locks.acquire(key, { timeoutMs: 3_000 }).then(
          async (h) => {
            await h.release();
            return `granted after ${Math.round(performance.now() - started)} ms`;
          },
          (e: unknown) => `${(e as Error).name} after ${Math.round(performance.now() - started)} ms`,
        );
        const entries = await Promise.all(churning);
        assert.match(got, /^granted/, `writer beside overlapping ${kind}s of other processes (entries ${entries.join('+')}): ${got}`);
      });
    }
  });
}
