import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import type { TestDatabase } from '../support/test-database.js';
import { LockWorker } from '../support/worker-host.js';
import { contractSuite } from '../support/contract-targets.js';
import { COUNTER_TABLE, counterDatabase, type CounterArgs, type CounterResult } from './scenarios/counter.js';

/**
 * Exclusion across processes, under each strategy: PROCESSES x CALLERS concurrent callers do a racy read-then-write
 * on one counter row. Under one lock key the counter must come out exact and every grant must
 * have its own fencing token; without the lock (negative control) the same workload must lose
 * updates, or this test could not see a violation at all.
 */
const PROCESSES = 4;
const CALLERS = 4;
const ITERATIONS = 64; // 4 x 4 x 64 = 1024 critical sections
const GAP_MS = 1;
const SCENARIO = new URL('./scenarios/counter.js', import.meta.url).href;
const BASIC = new URL('../support/scenarios/basic.js', import.meta.url).href;

contractSuite('exclusion', `exclusion across processes`, { postgres: true }, (target) => {
  const { strategy } = target;
  let db: TestDatabase;
  let workers: LockWorker[] = [];

  before(async () => {
    db = await counterDatabase(target);
    workers = await LockWorker.startMany(PROCESSES, {
      settings: db.settings, // The counter is written through the DataSource, outside a row-lock holder's transaction on purpose
      // (the lock alone must exclude): no escaped-write warning wanted.
      options: { leaseMs: 5_000, strategy, escapedWrites: 'ignore' },
    });
  });
  after(async () => {
    await Promise.all(workers.map((w) => w.close()));
    await db?.drop();
  });

  async function runWorkload(counterId: number, locked: boolean, key: string): Promise<{ results: CounterResult[]; final: number; ms: number }> {
    await db.query(`INSERT INTO ${COUNTER_TABLE} (id, value) VALUES (?, 0)`, [counterId]);
    const args: CounterArgs = {
      key,
      counterId,
      callers: CALLERS,
      iterations: ITERATIONS,
      locked,
      gapMs: GAP_MS,
    };
    const started = performance.now();
    const results = await Promise.all(workers.map((w) => w.run<CounterResult>(SCENARIO, 'countUp', args)));
    const ms = performance.now() - started;
    const [row] = await db.query<{ value: number }[]>(`SELECT value FROM ${COUNTER_TABLE} WHERE id = ?`, [counterId]);
    return { results, final: Number(row!.value), ms };
  }

  it('with the lock: the counter is exact, tokens are 1..N, every log row ended RELEASED', async (t) => {
    const key = 'counter';
    const { results, final, ms } = await runWorkload(1, true, key);
    const sections = PROCESSES * CALLERS * ITERATIONS;
    assert.equal(
      results.reduce((n, r) => n + r.sections, 0),
      sections,
    );
    assert.equal(final, sections, `lost updates under the lock: ${sections - final}`);
    for (const r of results) assert.equal(r.maxInside, 1, 'two local callers were inside the critical section at once');

    // Every grant had its own token, and together they are exactly 1..N (never reused, never skipped).
    const tokens = results.flatMap((r) => r.tokens).sort((a, b) => a - b);
    assert.deepEqual(
      tokens,
      Array.from({ length: sections }, (_, i) => i + 1),
    );

    // The audit trail: one row per acquisition, all RELEASED, tokens strictly increasing in grant order.
    const rows = await db.logRows(key);
    assert.equal(rows.length, sections);
    assert.deepEqual(new Set(rows.map((r) => r.status)), new Set(['RELEASED']));
    assert.deepEqual(
      rows.map((r) => Number(r.fencing_token)),
      Array.from({ length: sections }, (_, i) => i + 1),
    );
    // Consecutive holders never overlap by the server clock: each grant starts after the previous ended.
    for (let i = 1; i < rows.length; i++) {
      assert.ok(
        (rows[i]!.acquired_at as Date).getTime() >= (rows[i - 1]!.ended_at as Date).getTime(),
        `grant ${i + 1} started before grant ${i} ended`,
      );
    }
    // The key's counter stands at N: the next grant, through the public API, gets N + 1.
    assert.equal(await workers[0]!.run<number>(BASIC, 'holdFor', { key, holdMs: 0 }), sections + 1);

    const perSecond = (sections / ms) * 1000;
    const maxWait = Math.max(...results.map((r) => r.maxWaitMs));
    t.diagnostic(
      `locked: ${sections} critical sections by ${PROCESSES} processes x ${CALLERS} callers in ${Math.round(ms)} ms = ` +
        `${perSecond.toFixed(1)} critical sections/s, lost updates ${sections - final}, longest wait ${Math.round(maxWait)} ms`,
    );
  });

  it('negative control without the lock: the same workload loses updates', async (t) => {
    const { results, final, ms } = await runWorkload(2, false, 'unused');
    const sections = results.reduce((n, r) => n + r.sections, 0);
    const lost = sections - final;
    assert.ok(lost > 0, `expected lost updates without the lock, final counter ${final} of ${sections}`);
    t.diagnostic(`unlocked: ${sections} racy increments in ${Math.round(ms)} ms, lost updates ${lost} (final counter ${final})`);
  });
});
