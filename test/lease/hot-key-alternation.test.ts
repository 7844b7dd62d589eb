import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import type { TestDatabase } from '../support/test-database.js';
import { LockWorker } from '../support/worker-host.js';
import { contractSuite } from '../support/contract-targets.js';
import { COUNTER_TABLE, counterDatabase, type CounterArgs, type CounterResult } from '../contract/scenarios/counter.js';

/**
 * A hot key across processes, every caller re-requesting at once: each process keeps one waiter
 * in the doorbell's first-come, first-served queue in the server, its other callers waiting behind
 * that one locally, so holds pass from process to process. A process that put each of its callers
 * in the server's queue would see them follow each other there, and keep that order round after
 * round (seen at 44–75 % of consecutive holds in one process, against 0 % here; a fair draw
 * among 16 callers gives 20 %). The holds' order is read from the fencing tokens, which the key
 * hands out in order.
 */
const PROCESSES = 4;
const CALLERS = 4;
const ITERATIONS = 20;
/** The first holds, while every process's callers first queue, are left out. */
const WARM_UP = 32;
const SCENARIO = new URL('../contract/scenarios/counter.js', import.meta.url).href;

contractSuite('lease-mechanics', 'a hot key across processes', { postgres: true }, (target) => {
  let db: TestDatabase;
  let workers: LockWorker[] = [];

  before(async () => {
    db = await counterDatabase(target);
    workers = await LockWorker.startMany(PROCESSES, {
      settings: db.settings,
      options: { ...target.options(), leaseMs: 5_000, escapedWrites: 'ignore', janitor: false },
    });
  });
  after(async () => {
    await Promise.all(workers.map((w) => w.close()));
    await db?.drop();
  });

  it('holds pass from process to process: one waiter per process in the server, the others behind it locally', async () => {
    await db.query(`INSERT INTO ${COUNTER_TABLE} (id, value) VALUES (1, 0)`);
    const args: CounterArgs = { key: 'alternate', counterId: 1, callers: CALLERS, iterations: ITERATIONS, locked: true, gapMs: 0 };
    // A first burst, so that each process's holders rang the key's bell a moment ago when the
    // measured one starts: each caller's first try then waits on the bell at once.
    await Promise.all(workers.map((w) => w.run<CounterResult>(SCENARIO, 'countUp', { ...args, iterations: 3 })));
    const results = await Promise.all(workers.map((w) => w.run<CounterResult>(SCENARIO, 'countUp', args)));
    const holder = new Map<number, number>();
    results.forEach((r, process) => r.tokens.forEach((token) => holder.set(token, process)));
    assert.equal(holder.size, PROCESSES * CALLERS * ITERATIONS, 'a token per hold of the measured burst');
    const order = [...holder.keys()].sort((x, y) => x - y).map((token) => holder.get(token)!);
    const steady = order.slice(WARM_UP);
    const same = steady.filter((p, i) => i > 0 && p === steady[i - 1]).length / (steady.length - 1);
    assert.ok(same <= 0.3, `${(same * 100).toFixed(0)} % of consecutive holds in one process: ${steady.join('')}`);
  });
});
