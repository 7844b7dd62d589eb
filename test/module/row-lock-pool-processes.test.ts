import 'reflect-metadata';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { TestDatabase } from '../support/test-database.js';
import { createLockApp } from '../support/lock-app.js';
import { LockWorker } from '../support/worker-host.js';
import type { WorkerContext } from '../support/lock-worker.js';

/**
 * Two processes, each with a DataSource pool of 3 (row-lock sessions: at most 2), each with 6
 * callers of one key held by a third process: at most 2 of each process's callers wait in the
 * database (4 statements in all), the others wait in their process without a connection. When the
 * holder goes, all 12 are granted one after the other: no overlap, tokens strictly increasing.
 */
const SELF = import.meta.url;

export async function crowd(ctx: WorkerContext<{ key: string; count: number }>): Promise<{ token: number; start: number; end: number }[] | string> {
  const { key, count } = ctx.args;
  ctx.emit('started');
  const runs = await Promise.all(
    Array.from({ length: count }, () =>
      ctx.locks
        .withLock(
          key,
          async (lock) => {
            const start = Date.now();
            await new Promise((r) => setTimeout(r, 15));
            return { token: lock.fencingToken, start, end: Date.now() };
          },
          { timeoutMs: 20_000, strategy: 'row-lock' },
        )
        .catch((e: Error) => `${e.name}: ${e.message}`),
    ),
  );
  const failed = runs.filter((r) => typeof r === 'string');
  return failed.length ? (failed as string[]).join(' | ') : (runs as { token: number; start: number; end: number }[]);
}

export async function oneTries(
  ctx: WorkerContext<{ prefix: string; count: number; held?: string }>,
): Promise<{ outcomes: string[]; heldMs: number; heldAnswer: string }> {
  const { prefix, count, held } = ctx.args;
  const outcomes = await Promise.all(
    Array.from({ length: count }, (_, i) =>
      ctx.locks
        .runLocked(`${prefix}:${i}`, async () => 'ran', { onLocked: 'skip', transaction: 'none', strategy: 'row-lock' })
        .then(
          (v) => v ?? 'skipped',
          (e: Error) => `${e.name}: ${e.message}`,
        ),
    ),
  );
  let heldMs = 0;
  let heldAnswer = '';
  if (held) {
    const t0 = performance.now();
    const h = await ctx.locks.tryAcquire(held, { strategy: 'row-lock' }).catch((e: Error) => e);
    heldMs = performance.now() - t0;
    heldAnswer = h === null ? 'null' : h instanceof Error ? `${h.name}: ${h.message}` : 'granted';
    if (h && !(h instanceof Error)) await h.release();
  }
  return { outcomes, heldMs, heldAnswer };
}

if (!process.env.DB_LOCK_WORKER) {
  describe('row-lock callers of two processes, beyond their pools, on one held key', () => {
    let db: TestDatabase;
    before(async () => {
      db = await TestDatabase.create();
    });
    after(async () => {
      await db?.drop();
    });

    it('at most pool − 1 waiters per process in the database; all granted in turn after the holder goes', async () => {
      const { app, locks } = await createLockApp(db.settings, { strategy: 'row-lock', janitor: false });
      const workers = await LockWorker.startMany(2, {
        settings: db.settings,
        options: { strategy: 'row-lock', janitor: false },
        mysqlExtra: { connectionLimit: 3 },
      });
      try {
        await locks.withLock('mp', async () => undefined);
        const holder = await locks.acquire('mp');
        const runs = workers.map((w) => w.run<Awaited<ReturnType<typeof crowd>>>(SELF, 'crowd', { key: 'mp', count: 6 }));
        let most = 0;
        const until = performance.now() + 1_500;
        while (performance.now() < until) {
          const rows = await db.query<{ n: number }[]>(
            `SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST WHERE DB = ? AND COMMAND = 'Query' AND INFO LIKE '%db_lock%' AND ID <> CONNECTION_ID()`,
            [db.name],
          );
          most = Math.max(most, Number(rows[0]!.n));
          await new Promise((r) => setTimeout(r, 25));
        }
        await holder.release();
        const results = await Promise.all(runs);
        for (const r of results) assert.ok(Array.isArray(r), `a worker's callers failed: ${String(r)}`);
        assert.ok(most >= 2 && most <= 4, `statements waiting in the database at once: ${most} (2 processes × (pool 3 − 1) = at most 4)`);
        const all = (results as { token: number; start: number; end: number }[][]).flat().sort((a, b) => a.token - b.token);
        assert.equal(all.length, 12);
        for (let i = 1; i < all.length; i++) {
          assert.ok(all[i]!.token > all[i - 1]!.token, `tokens not strictly increasing: ${all.map((x) => x.token).join(',')}`);
          assert.ok(
            all[i]!.start >= all[i - 1]!.end,
            `holds overlap: token ${all[i - 1]!.token} ran until ${all[i - 1]!.end}, token ${all[i]!.token} began at ${all[i]!.start}`,
          );
        }
      } finally {
        await Promise.all(workers.map((w) => w.close()));
        await app.close();
      }
    });

    it('fresh process: 6 skip jobs on 6 never-used keys all run; a one try on a key another process holds answers null at once', async () => {
      const { app, locks } = await createLockApp(db.settings, { strategy: 'row-lock', janitor: false });
      const [worker] = await LockWorker.startMany(1, { settings: db.settings, options: { strategy: 'row-lock', janitor: false } });
      try {
        await locks.withLock('ot:held', async () => undefined);
        const holder = await locks.acquire('ot:held');
        const r = await worker!.run<{ outcomes: string[]; heldMs: number; heldAnswer: string }>(SELF, 'oneTries', {
          prefix: 'ot:new',
          count: 6,
          held: 'ot:held',
        });
        await holder.release();
        assert.deepEqual(r.outcomes, Array(6).fill('ran'), `skip jobs on free never-used keys: ${r.outcomes.join(' | ')}`);
        assert.equal(r.heldAnswer, 'null', `tryAcquire on a key held elsewhere: ${r.heldAnswer}`);
        assert.ok(r.heldMs < 200, `tryAcquire on a held key took ${r.heldMs.toFixed(0)} ms (a single try answers at once)`);
      } finally {
        await worker!.close();
        await app.close();
      }
    });
  });
}
