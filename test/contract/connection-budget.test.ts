import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { DB_LOCK_DEFAULTS, type LockService } from '../../lib/index.js';
import { createLockApp } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';
import { bellName } from '../../lib/store/mysql/doorbells.js';
import { bellKey } from '../../lib/store/postgres/pg-doorbells.js';
import type { PgLockLog } from '../../lib/store/postgres/pg-lock-log.js';
import { contractSuite } from '../support/contract-targets.js';
import { mysqlLogOf, partsOf } from '../support/lock-internals.js';
import { sessionIds } from '../support/server-sessions.js';

/**
 * Every connection the library opens counts against `poolSize`: the renewal lane, the shared
 * connections and the doorbells borrowed from them. Counted on the server (PROCESSLIST of this
 * test's own database, so other runs on the server are not counted; on PostgreSQL the client
 * backends of pg_stat_activity, and doorbells are advisory locks in pg_locks), minus the apps' DataSource
 * connections and a contending service's library connections (thread ids from their pools), while
 * many single-key writers of both contend, so that the measured service's doorbells are in use
 * (callers of one service alone queue in the process and never ask for a bell). Counted at the
 * default `poolSize`, the bound the README states for a process left as shipped. Before the
 * budget, doorbells had a pool of their own as large again.
 */
const POOL_SIZE = DB_LOCK_DEFAULTS.poolSize;
const KEYS = 6;
const CALLERS_PER_KEY = 4;
const RUN_MS = 2_500;

contractSuite('connection-budget', 'connection budget: poolSize bounds every connection the library opens', { postgres: true }, (target) => {
  let db: TestDatabase;
  const apps: INestApplicationContext[] = [];
  before(async () => {
    db = await TestDatabase.forTarget(target);
  });
  after(async () => {
    await closeAll();
    await db?.drop();
  });

  async function closeAll(): Promise<void> {
    for (const app of apps.splice(0)) await app.close();
  }

  type Threads = { _allConnections: { toArray(): { threadId: number | null }[] } };
  /** pg's pool: its clients' backend pids (processID). */
  type PgThreads = { _clients: { processID: number | null | undefined }[] };
  // A connection still in its handshake has no thread id (pg: backend pid) yet (null): the sample cannot attribute it.
  const threadsOf = (...pools: Threads[]): Set<number | null> => new Set(pools.flatMap((p) => p._allConnections.toArray().map((c) => c.threadId)));
  const pgThreadsOf = (...pools: PgThreads[]): Set<number | null> => new Set(pools.flatMap((p) => p._clients.map((c) => c.processID ?? null)));

  async function start(): Promise<{ locks: LockService; dataSourceThreads: () => Set<number | null>; libraryThreads: () => Set<number | null> }> {
    // No janitor: its runs would add traffic that is not the load's.
    const { app, locks } = await createLockApp(db.settings, target.options({ janitor: false, leaseMs: 10_000 }));
    apps.push(app);
    if (db.type === 'postgres') {
      // One pg pool of poolSize serves the library's statements, the renewals and the doorbells' sessions.
      const business = (app.get(DataSource).driver as unknown as { master: PgThreads }).master;
      const library = ((partsOf(locks).store.log as PgLockLog).pool as unknown as { pool: PgThreads }).pool;
      return { locks, dataSourceThreads: () => pgThreadsOf(business), libraryThreads: () => pgThreadsOf(library) };
    }
    const business = (app.get(DataSource).driver as unknown as { pool: Threads }).pool;
    const library = mysqlLogOf(locks).pool as unknown as { pool: Threads; reserved: Threads };
    return { locks, dataSourceThreads: () => threadsOf(business), libraryThreads: () => threadsOf(library.pool, library.reserved) };
  }

  /** Contended single-key writes on every key, while PROCESSLIST is sampled: the most library connections seen, and doorbells seen in use. */
  async function underLoad(
    services: Awaited<ReturnType<typeof start>>[],
    contender?: Awaited<ReturnType<typeof start>>,
  ): Promise<{ most: number; bellWaits: number }> {
    const until = performance.now() + RUN_MS;
    const callers = [...services, ...(contender ? [contender] : [])].flatMap(({ locks }) =>
      Array.from({ length: KEYS * CALLERS_PER_KEY }, async (_, i) => {
        while (performance.now() < until) {
          const lock = await locks.acquire(`budget:${i % KEYS}`, { timeoutMs: 5_000 });
          await new Promise((r) => setTimeout(r, 3));
          await lock.release();
        }
      }),
    );
    const others = (): Set<number | null> =>
      new Set([
        ...[...services, ...(contender ? [contender] : [])].flatMap((s) => [...s.dataSourceThreads()]),
        ...(contender ? contender.libraryThreads() : []),
      ]);
    let most = 0;
    let bellWaits = 0;
    let done = false;
    const all = Promise.all(callers).finally(() => (done = true));
    while (!done) {
      const othersBefore = others();
      const ids = await sessionIds(db);
      // Connections opened while PROCESSLIST was read are in the later set.
      const notMeasured = new Set([...othersBefore, ...others()]);
      const library = ids.filter((id) => !notMeasured.has(id));
      // Skipped while another pool is connecting: its new session would be counted as the measured one's.
      if (!notMeasured.has(null)) most = Math.max(most, library.length);
      // A doorbell of a measured service in use: its named lock is held by one of their sessions (a holder's or a waiter's).
      const contenders = contender?.libraryThreads() ?? new Set<number | null>();
      bellWaits += (await bellHolders()).filter((id) => !contenders.has(id)).length;
      await new Promise((r) => setTimeout(r, 2));
    }
    await all;
    return { most, bellWaits };
  }

  /** The sessions holding the keys' doorbells: MySQL named locks (IS_USED_LOCK), PostgreSQL advisory locks of this database (pg_locks). */
  async function bellHolders(): Promise<number[]> {
    const keys = Array.from({ length: KEYS }, (_, i) => `budget:${i}`);
    if (db.type === 'postgres') {
      // A bigint advisory lock is listed as its high 32 bits (classid) and low 32 bits (objid), objsubid 1.
      const rows = await db.query<{ pid: number }[]>(
        `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1 ` +
          `AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) ` +
          `AND ((classid::bigint << 32) | objid::bigint) IN (${keys.map(() => '?::bigint').join(', ')})`,
        keys.map((key) => bellKey(key)),
      );
      return rows.map((r) => Number(r.pid));
    }
    const bells = keys.map((key) => bellName(db.name, key));
    const [used] = await db.query<Record<string, number | null>[]>(`SELECT ${bells.map((_, i) => `IS_USED_LOCK(?) AS b${i}`).join(', ')}`, bells);
    return Object.values(used!).flatMap((id) => (id === null ? [] : [Number(id)]));
  }

  it(`one process: at most poolSize (${POOL_SIZE}) library connections, doorbells included`, async (t) => {
    const one = await start();
    const contender = await start();
    const { most, bellWaits } = await underLoad([one], contender).finally(() => closeAll());
    t.diagnostic(`most library connections seen: ${most}; doorbells seen in use: ${bellWaits}`);
    assert.ok(bellWaits > 0, 'the load put doorbells in use (else the bound was not exercised)');
    assert.ok(most <= POOL_SIZE, `${most} library connections > poolSize ${POOL_SIZE}`);
    assert.ok(most >= POOL_SIZE - 1, `the load used the budget (${most} connections seen)`);
  });

  it('negative control: two services in one process are counted as more than one budget', async (t) => {
    const two = [await start(), await start()];
    const { most } = await underLoad(two).finally(() => closeAll());
    t.diagnostic(`most library connections seen for two services: ${most}`);
    // The count sees every library connection: a leak of even one budget's worth would show.
    assert.ok(most > POOL_SIZE, `two services' connections (${most}) must exceed one poolSize`);
    assert.ok(most <= 2 * POOL_SIZE, `${most} > 2 × poolSize`);
  });
});
