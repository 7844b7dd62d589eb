import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { TestDatabase } from '../support/test-database.js';
import { LockWorker } from '../support/worker-host.js';
import { contractSuite } from '../support/contract-targets.js';
import type { LockMode } from '../../lib/index.js';
import { PROBE_TABLE_SQL, type LoopArgs } from './scenarios/read-write.js';
import { analyseIntervals, holdIntervals, probe, summarise } from './rw-probe.js';

const SCENARIOS = new URL('./scenarios/read-write.js', import.meta.url).href;
/** Short backoff so a few thousand sections fit in the time budget; lease long enough never to expire here. */
const OPTIONS = { leaseMs: 5000, retryMinDelayMs: 5, retryMaxDelayMs: 50 };
const READER_ITERATIONS = 400;
const WRITER_ITERATIONS = 150;

/**
 * Mutual exclusion for read/write locks across processes: 6 readers and 2 writers in 4 processes on one key.
 * Two detectors that do not trust the library: a probe row changed inside the critical sections,
 * and the server-clock intervals of the log rows.
 */
contractSuite('read-write', `read/write exclusion: 6 readers + 2 writers in 4 processes`, { postgres: true }, (target) => {
  const { strategy } = target;
  let db: TestDatabase;
  let workers: LockWorker[];
  before(async () => {
    db = await TestDatabase.forTarget(target);
    await db.query(PROBE_TABLE_SQL + db.sql.tableOptions);
    await db.query('INSERT INTO rw_probe (id) VALUES (1), (2)');
    // The probe rows are written through the DataSource on purpose (the lock alone must exclude).
    workers = await LockWorker.startMany(4, {
      settings: db.settings,
      options: { ...OPTIONS, strategy, escapedWrites: 'ignore' },
    });
  });
  after(async () => {
    await Promise.all((workers ?? []).map((w) => w.close()));
    await db?.drop();
  });

  it('a writer never overlaps anyone; readers overlap each other, across processes', async (t) => {
    // Process layout: w0 R R | w1 R R W | w2 R W | w3 R
    const layout: [number, LockMode][] = [
      [0, 'read'],
      [0, 'read'],
      [1, 'read'],
      [1, 'read'],
      [1, 'write'],
      [2, 'read'],
      [2, 'write'],
      [3, 'read'],
    ];
    const started = performance.now();
    const results = await Promise.all(
      layout.map(([w, role]) =>
        workers[w]!.run<{ waits: number[] }>(SCENARIOS, 'loop', {
          key: 'loan:1',
          role,
          iterations: role === 'read' ? READER_ITERATIONS : WRITER_ITERATIONS,
          holdMs: role === 'read' ? 3 : 1,
          probeId: 1,
        } satisfies LoopArgs),
      ),
    );
    const elapsedMs = performance.now() - started;
    const p = await probe(db, 1);
    const total = 6 * READER_ITERATIONS + 2 * WRITER_ITERATIONS;

    assert.equal(p.violations, 0, 'no section saw a writer together with anyone');
    assert.deepEqual([p.readers, p.writers], [0, 0], 'every section left the probe');
    assert.equal(p.reader_entries, 6 * READER_ITERATIONS);
    assert.equal(p.writer_entries, 2 * WRITER_ITERATIONS);
    assert.ok(p.max_readers > 1, `readers must share the key (max concurrent readers ${p.max_readers})`);

    const holds = await holdIntervals(db, 'loan:1');
    assert.equal(holds.length, total, 'one log row per acquisition');
    assert.deepEqual(new Set(holds.map((h) => h.status)), new Set(['RELEASED']), 'every hold ended RELEASED');
    if (strategy === 'lease') {
      const tokens = holds.map((h) => h.fencingToken).sort((a, b) => a - b);
      assert.deepEqual(
        tokens,
        Array.from({ length: total }, (_, i) => i + 1),
        'every grant, reader or writer, took the next fencing token',
      );
    } else {
      // Row-lock readers share the key and do not bump its token: each writer takes the next one,
      // a reader holds the token of the last writer before it (0 before the first).
      const writerTokens = holds.filter((h) => h.mode === 'write').map((h) => h.fencingToken);
      assert.deepEqual(
        [...writerTokens].sort((a, b) => a - b),
        Array.from({ length: writerTokens.length }, (_, i) => i + 1),
        'every writer took the next fencing token',
      );
      for (const h of holds.filter((r) => r.mode === 'read'))
        assert.ok(h.fencingToken >= 0 && h.fencingToken <= writerTokens.length, `reader token ${h.fencingToken}`);
    }
    const { writeOverlaps, crossProcessReadOverlaps } = analyseIntervals(holds);
    assert.equal(writeOverlaps, 0, 'no write hold overlaps another hold (server clock)');
    assert.ok(crossProcessReadOverlaps > 0, 'read holds of different processes overlap');

    const writerWaits = summarise(results.filter((_, i) => layout[i]![1] === 'write').flatMap((r) => r.waits));
    const readerWaits = summarise(results.filter((_, i) => layout[i]![1] === 'read').flatMap((r) => r.waits));
    t.diagnostic(
      `sections=${total} in ${Math.round(elapsedMs)} ms; readers max concurrent=${p.max_readers} ` +
        `avg at entry=${(p.reader_sum / p.reader_entries).toFixed(2)}; cross-process read overlaps=${crossProcessReadOverlaps}; ` +
        `writer wait ms ${JSON.stringify(writerWaits)}; reader wait ms ${JSON.stringify(readerWaits)}`,
    );
  });

  it('control: the detectors do see overlap when the "writers" take only read locks', async () => {
    await Promise.all(
      [0, 1, 2, 3].map((w) =>
        workers[w]!.run(SCENARIOS, 'loop', {
          key: 'control',
          role: w < 2 ? 'write' : 'read',
          lockMode: 'read',
          iterations: 60,
          holdMs: 3,
          probeId: 2,
        } satisfies LoopArgs),
      ),
    );
    const p = await probe(db, 2);
    assert.ok(p.violations > 0, `the probe must report the unprotected "writers" (violations ${p.violations})`);
    const { writeOverlaps } = analyseIntervals(
      (await holdIntervals(db, 'control')).map((h, i) => ({
        ...h,
        mode: i % 2 ? 'write' : h.mode,
      })),
    );
    assert.ok(writeOverlaps > 0, 'the interval check flags overlapping holds labelled write');
  });
});
