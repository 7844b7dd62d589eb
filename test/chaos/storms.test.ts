import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { TestDatabase } from '../support/test-database.js';
import { LockWorker } from '../support/worker-host.js';
import { sessionsLeft } from '../support/session-count.js';
import { STRATEGIES } from '../support/strategies.js';
import type { StormArgs, StormResult } from './storm-scenario.js';

/**
 * Load shapes that break naive lock tables.
 * - First-use storm: PROCESSES x CALLERS callers released at one instant on KEYS keys nobody has
 *   used, each call taking 3 random keys (creating key rows concurrently, in every order). Scaled to
 *   what 2 cores run in seconds: 8 processes x 6 callers = 48 concurrent callers, 200 keys.
 * - Pool exhaustion: a DataSource pool of 2 and 30 concurrent fenced callers: they queue for
 *   connections and finish, or fail with a typed error; none hangs, nothing leaks.
 * Both: every granted token is unique per key and the tokens of a key are exactly 1..n, one key
 * row per key, no live row and no open connection at the end.
 */
const PROCESSES = 8;
const CALLERS = 6;
const KEYS = Array.from({ length: 200 }, (_, i) => `storm:${i}`);
const SWEEP_PROCESSES = 8;
const SWEEP_CALLERS = 8;
const SCENARIO = new URL('./storm-scenario.js', import.meta.url).href;

describe('storms', () => {
  let db: TestDatabase;
  before(async () => {
    db = await TestDatabase.create('dblock_storm');
  });
  after(async () => {
    await db?.drop();
  });

  async function check(results: StormResult[], keys: string[], namespace = ''): Promise<void> {
    const untyped = results.flatMap((r) => r.untyped);
    assert.deepEqual(untyped, [], 'only typed errors');
    const tokens = new Map<string, number[]>();
    for (const r of results) for (const [k, ts] of Object.entries(r.tokens)) tokens.set(k, [...(tokens.get(k) ?? []), ...ts]);
    for (const [key, ts] of tokens) {
      const sorted = [...ts].sort((a, b) => a - b);
      assert.deepEqual(
        sorted,
        Array.from({ length: sorted.length }, (_, i) => i + 1),
        `${key}: tokens ${sorted.join(',')}`,
      );
    }
    const [rows] = await db.query<{ n: number }[]>('SELECT COUNT(*) AS n FROM db_lock WHERE lock_key IN (?)', [
      keys.map((k) => Buffer.from(namespace + k)),
    ]);
    assert.ok(Number(rows!.n) <= keys.length, 'one key row per key');
    const [live] = await db.query<{ n: number }[]>("SELECT COUNT(*) AS n FROM db_lock_log WHERE status IN ('ACQUIRED', 'COMPLETED')");
    assert.equal(Number(live!.n), 0, 'no live row left');
  }

  for (const strategy of STRATEGIES)
    it(`first-use storm (${strategy}): ${PROCESSES * CALLERS} callers at a barrier on ${KEYS.length} unseen keys`, async (t) => {
      const keys = KEYS.map((k) => `${strategy}:${k}`);
      // Row-lock callers wait on DataSource connections: allow all of a process's callers to (pool 10).
      const workers = await LockWorker.startMany(PROCESSES, { settings: db.settings, options: { leaseMs: 10_000, maxRowLockWaiters: CALLERS } });
      try {
        const args: StormArgs = {
          startAt: Date.now() + 500,
          keys,
          callers: CALLERS,
          calls: 5,
          keysPerCall: 3,
          strategy,
          timeoutMs: 20_000,
          transaction: 'none',
        };
        const started = performance.now();
        const results = await Promise.all(workers.map((w) => w.run<StormResult>(SCENARIO, 'storm', args)));
        const done = results.reduce((n, r) => n + r.done, 0);
        t.diagnostic(
          `${done} of ${PROCESSES * CALLERS * 5} calls done in ${Math.round(performance.now() - started)} ms, typed errors ` +
            `${JSON.stringify(results.map((r) => r.typed))}, slowest call ${Math.round(Math.max(...results.map((r) => r.maxMs)))} ms`,
        );
        assert.equal(done, PROCESSES * CALLERS * 5, 'every call got its keys (20 s budget each)');
        await check(results, keys);
      } finally {
        await Promise.all(workers.map((w) => w.close()));
      }
    });

  // Every caller of 8 x 8 takes each of 200 unseen keys once (12,800 sections), with the default
  // DataSource pool (10) and no bound on queued callers: callers beyond the connections a process
  // may take wait for one, within their budget. Every section runs; no error of any kind.
  for (const strategy of STRATEGIES)
    it(`first-use sweep (${strategy}): ${SWEEP_PROCESSES} x ${SWEEP_CALLERS} callers each take all ${KEYS.length} unseen keys, timeoutMs 30000`, async (t) => {
      const keys = KEYS.map((k) => `sweep:${strategy}:${k}`);
      const workers = await LockWorker.startMany(SWEEP_PROCESSES, { settings: db.settings, options: { leaseMs: 10_000 } });
      try {
        const args: StormArgs = {
          startAt: Date.now() + 500,
          keys,
          callers: SWEEP_CALLERS,
          calls: 0,
          keysPerCall: 1,
          strategy,
          timeoutMs: 30_000,
          transaction: 'none',
          everyKey: true,
        };
        const started = performance.now();
        const results = await Promise.all(workers.map((w) => w.run<StormResult>(SCENARIO, 'storm', args)));
        const done = results.reduce((n, r) => n + r.done, 0);
        const sections = SWEEP_PROCESSES * SWEEP_CALLERS * KEYS.length;
        t.diagnostic(
          `${done} of ${sections} sections in ${Math.round(performance.now() - started)} ms, slowest ${Math.round(Math.max(...results.map((r) => r.maxMs)))} ms`,
        );
        assert.deepEqual(
          results.map((r) => r.typed),
          results.map(() => ({})),
          'no typed error',
        );
        assert.equal(done, sections, 'every section ran');
        await check(results, keys);
      } finally {
        await Promise.all(workers.map((w) => w.close()));
      }
    });

  it('pool exhaustion: a DataSource pool of 2 and 30 concurrent fenced callers', async (t) => {
    const keys = ['pool:a', 'pool:b', 'pool:c'];
    const [worker] = await LockWorker.startMany(1, { settings: db.settings, options: { leaseMs: 10_000 }, mysqlExtra: { connectionLimit: 2 } });
    try {
      const args: StormArgs = {
        startAt: Date.now(),
        keys,
        callers: 30,
        calls: 3,
        keysPerCall: 1,
        strategy: 'lease',
        timeoutMs: 20_000,
        transaction: 'requires-new',
      };
      const started = performance.now();
      const [result] = await Promise.all([worker!.run<StormResult>(SCENARIO, 'storm', args)]);
      t.diagnostic(
        `${result!.done} of 90 fenced calls done in ${Math.round(performance.now() - started)} ms; typed errors ${JSON.stringify(result!.typed)}`,
      );
      assert.equal(result!.done + Object.values(result!.typed).reduce((a, b) => a + b, 0), 90, 'every call ended');
      assert.ok(result!.done >= 60, `most calls got through a pool of 2: ${result!.done}`);
      await check([result!], keys);
    } finally {
      await worker!.close();
    }
    // Up to 3 s: the server drops a closed connection's thread a moment after the client's QUIT.
    assert.deepEqual(await sessionsLeft(db, 3_000), [], 'no connection left open');
  });
});
