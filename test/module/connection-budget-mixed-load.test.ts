import 'reflect-metadata';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { DataSource } from 'typeorm';
import { DbLockError, type LockService } from '../../lib/index.js';
import { createLockApp } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';
import { mysqlLogOf } from '../support/lock-internals.js';

/**
 * README "Connections per process": the library opens at most `poolSize` connections (doorbells,
 * renewal lane, janitor and admin calls included) and the DataSource at most its own pool size.
 * A heavy mixed load in one process (hot lease keys with doorbells, readers, multi-key, row-lock
 * holders and waiters, fenced calls, semaphores, admin calls, a fast janitor, short timeouts) is
 * sampled in PROCESSLIST of this test's database: the count never exceeds poolSize + the
 * DataSource's pool size, and no session is left once app.close() resolved.
 */
const POOL_SIZE = 4;
const DS_POOL = 6;
const RUN_MS = Number(process.env.DB_LOCK_TEST_RUN_MS ?? 6_000);

describe('connection budget under mixed load', () => {
  let db: TestDatabase;
  before(async () => {
    db = await TestDatabase.create();
  });
  after(async () => {
    await db?.drop();
  });

  async function sessions(): Promise<{ id: number; info: string | null; command: string; time: number }[]> {
    return db.query('SELECT id, info, command, time FROM information_schema.PROCESSLIST WHERE db = ? AND id <> CONNECTION_ID()', [db.name]);
  }

  for (const closeUnderLoad of [false, true])
    it(`never more than poolSize (${POOL_SIZE}) + DataSource pool (${DS_POOL}) sessions; none after close${closeUnderLoad ? ' (closed under load)' : ''}`, async (t) => {
      const { app, locks } = await createLockApp(
        db.settings,
        { poolSize: POOL_SIZE, leaseMs: 2_000, janitor: { intervalMs: 200, logRetentionMs: 0, idleKeyMs: 0, batchSize: 5 } },
        { poolSize: DS_POOL },
      );
      type Threads = { _allConnections: { toArray(): { threadId: number | null }[] } };
      const threadsOf = (...pools: Threads[]) => new Set(pools.flatMap((p) => p._allConnections.toArray().map((c) => c.threadId)));
      const business = (app.get(DataSource).driver as unknown as { pool: Threads }).pool;
      const library = mysqlLogOf(locks).pool as unknown as { pool: Threads; reserved: Threads };
      const rawErrors: string[] = [];
      const kinds = new Map<string, number>();
      const note = (error: unknown) => {
        const k = (error as Error)?.constructor?.name;
        kinds.set(k, (kinds.get(k) ?? 0) + 1);
        if (!(error instanceof DbLockError)) rawErrors.push(`${(error as Error)?.constructor?.name}: ${(error as Error)?.message}`);
      };
      const until = performance.now() + RUN_MS;
      const ok = new Map<string, number>();
      let group = '';
      const loop = (fn: (i: number) => Promise<unknown>) => {
        const g = group;
        return (async () => {
          for (let i = 0; performance.now() < until; i++) {
            await fn(i).then(() => ok.set(g, (ok.get(g) ?? 0) + 1), note);
            await new Promise(setImmediate);
          }
        })();
      };
      const slowAdmin: string[] = [];
      const rnd = (n: number) => Math.floor(Math.random() * n);
      const workers: Promise<void>[] = [];
      const l: LockService = locks;
      group = 'Hot lease writers';
      // Hot lease writers (doorbells), some with short budgets.
      for (let c = 0; c < 12; c++)
        workers.push(
          loop(async () => {
            const h = await l.acquire(`hot:${c % 3}`, { timeoutMs: c % 4 === 0 ? 30 : 1_500 });
            await sleep(rnd(4));
            await h.release();
          }),
        );
      group = 'Readers of a hot key';
      // Readers of a hot key.
      for (let c = 0; c < 3; c++) workers.push(loop(() => l.withLock([{ key: 'hot:0', mode: 'read' }], () => sleep(2), { timeoutMs: 500 })));
      group = 'Multi-key';
      // Multi-key.
      for (let c = 0; c < 2; c++) workers.push(loop(() => l.withLock(['hot:1', 'hot:2', `m:${c}`], () => sleep(1), { timeoutMs: 500 })));
      group = 'Row-lock holders';
      // Row-lock holders and waiters (DataSource connections).
      for (let c = 0; c < 8; c++)
        workers.push(
          loop(() =>
            l.runLocked(
              `row:${c % 2}`,
              async () => {
                await l.manager.query('SELECT 1');
                await sleep(rnd(5));
              },
              { strategy: 'row-lock', timeoutMs: c % 3 === 0 ? 0 : 300 },
            ),
          ),
        );
      group = 'Fenced lease calls';
      // Fenced lease calls.
      for (let c = 0; c < 3; c++) workers.push(loop((i) => l.runLocked(`fenced:${i % 4}`, () => l.manager.query('SELECT 1'), { timeoutMs: 800 })));
      group = 'Semaphores';
      // Semaphores.
      for (let c = 0; c < 4; c++) workers.push(loop(() => l.withSemaphore('sem', 2, () => sleep(3), { timeoutMs: 400 })));
      group = 'Admin calls';
      // Admin calls and the janitor on demand.
      workers.push(
        loop(async (i) => {
          const timed = async (what: string, p: () => Promise<unknown>) => {
            const t0 = performance.now();
            try {
              await p();
            } finally {
              const ms = performance.now() - t0;
              if (ms > 500) slowAdmin.push(`${what} ${Math.round(ms)} ms`);
            }
          };
          await timed('inspect', () => l.inspect(`hot:${i % 3}`));
          await timed('listLocks', () => l.listLocks({ limit: 5 }));
          if (i % 5 === 0) await timed('forceRelease', () => l.forceRelease('hot:1', 'budget test'));
          if (i % 7 === 0) await timed('runJanitor', () => l.runJanitor());
          await sleep(20);
        }),
      );

      let most = 0;

      let mostLibrary = 0;
      let unknownSeen = 0;
      let worst: unknown[] = [];
      let done = false;
      const all = Promise.all(workers).finally(() => (done = true));
      let closing: Promise<void> | undefined;
      if (closeUnderLoad)
        void sleep(RUN_MS / 2).then(() => {
          closing = app.close();
        });
      while (!done) {
        const known = new Set([...threadsOf(business), ...threadsOf(library.pool, library.reserved)]);
        const rows = await sessions();
        const knownAfter = new Set([...threadsOf(business), ...threadsOf(library.pool, library.reserved)]);
        const lib = threadsOf(library.pool, library.reserved);
        mostLibrary = Math.max(mostLibrary, rows.filter((r) => lib.has(Number(r.id))).length);
        unknownSeen = Math.max(unknownSeen, rows.filter((r) => !known.has(Number(r.id)) && !knownAfter.has(Number(r.id))).length);
        if (rows.length > most) {
          most = rows.length;
          worst = rows.map((r) => ({
            ...r,
            pool: lib.has(Number(r.id)) ? 'library' : known.has(Number(r.id)) || knownAfter.has(Number(r.id)) ? 'datasource' : 'gone',
          }));
        }
        await sleep(3);
      }
      await all;
      t.diagnostic(
        `most sessions: ${most}; most library: ${mostLibrary}; most closed-by-client but still on the server: ${unknownSeen}; closed ${closeUnderLoad} errors ${JSON.stringify([...kinds])} ok ${JSON.stringify([...ok])} slowAdmin ${JSON.stringify(slowAdmin)}`,
      );
      if (!closing) closing = app.close();
      await closing;
      const afterClose: unknown[] = [];
      {
        // Sessions still on the server once close() resolved, polled for 300 ms (the server drops a closed socket's session at once).
        let left = await sessions();
        const deadline = performance.now() + 300;
        while (left.length > 0 && performance.now() < deadline) {
          await sleep(20);
          left = await sessions();
        }
        assert.deepEqual(left, [], `sessions still open 300 ms after app.close() resolved under load: ${JSON.stringify(left)}`);
      }
      await sleep(1_500);
      const later = await sessions();
      assert.deepEqual(rawErrors.slice(0, 5), [], `callers saw errors that are not DbLockErrors (${rawErrors.length})`);
      assert.ok(most <= POOL_SIZE + DS_POOL, `${most} sessions > poolSize ${POOL_SIZE} + DataSource pool ${DS_POOL}: ${JSON.stringify(worst)}`);
      assert.deepEqual(afterClose, [], 'no session of this database is left once app.close() resolved');
      assert.deepEqual(later, [], 'none 1.5 s later either');
    });
});
