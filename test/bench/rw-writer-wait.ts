/**
 * Writer wait under a continuous stream of readers, and reader concurrency.
 * 6 readers in 3 processes (2 each) re-take `loan:1` for reading as fast as they can, each
 * holding HOLD_MS; one writer in a 4th process takes it for writing every 40 ms. Run once with
 * writerPreference on (default) and once off. Default backoff (retryMinDelayMs 10, retryMaxDelayMs 200).
 *
 *   npx tsc -p tsconfig.json && node build/test/bench/rw-writer-wait.js [durationMs=20000] [holdMs=20]
 */
import { TestDatabase } from '../support/test-database.js';
import { LockWorker } from '../support/worker-host.js';
import { PROBE_TABLE_SQL } from '../contract/scenarios/read-write.js';
import { probe, summarise } from '../contract/rw-probe.js';

const SCENARIOS = new URL('../contract/scenarios/read-write.js', import.meta.url).href;
const DURATION_MS = Number(process.argv[2] ?? 20_000);
const HOLD_MS = Number(process.argv[3] ?? 20);

async function run(writerPreference: boolean): Promise<void> {
  const db = await TestDatabase.create('dblock_bench');
  await db.query(PROBE_TABLE_SQL);
  await db.query('INSERT INTO rw_probe (id) VALUES (1)');
  const workers = await LockWorker.startMany(4, { settings: db.settings, options: { leaseMs: 5000, writerPreference } });
  try {
    const stopAt = Date.now() + DURATION_MS;
    const readers = [0, 0, 1, 1, 2, 2].map((w) =>
      workers[w]!.run<{ sections: number }>(SCENARIOS, 'streamReader', { key: 'loan:1', stopAt, holdMs: HOLD_MS, probeId: 1 }),
    );
    const writer = workers[3]!.run<{ waits: number[]; timeouts: number }>(SCENARIOS, 'periodicWriter', {
      key: 'loan:1',
      stopAt,
      everyMs: 40,
      timeoutMs: 5000,
      probeId: 1,
    });
    const [{ waits, timeouts }, ...readerRuns] = await Promise.all([writer, ...readers]);
    const p = await probe(db, 1);
    process.stdout.write(
      JSON.stringify({
        writerPreference,
        durationMs: DURATION_MS,
        readerHoldMs: HOLD_MS,
        writerWaitMs: summarise(waits),
        writerTimeouts5s: timeouts,
        readerSections: readerRuns.reduce((a, r) => a + r.sections, 0),
        maxConcurrentReaders: p.max_readers,
        avgConcurrentReadersAtEntry: Number((p.reader_sum / p.reader_entries).toFixed(2)),
        violations: p.violations,
      }) + '\n',
    );
  } finally {
    await Promise.all(workers.map((w) => w.close()));
    await db.drop();
  }
}

await run(true);
await run(false);
