/**
 * Development probe: the PostgreSQL hot key of the bench (`processes` × `callers` on one key, each
 * hold incrementing one row), for a few designs only, rounds interleaved: holds per second, latency
 * p99, and the contending processes' CPU per hold (every thread, then their main threads alone).
 * A design whose handoff chain is longer gets fewer holds through for the same CPU per second.
 * `node build/test/bench/probe-pg-hot-key.js [designs, comma-separated: lease,lease-by-hand] [rounds: 3]`;
 * BENCH_PROCESSES, BENCH_CALLERS and BENCH_WINDOW_MS as for the bench.
 */
import 'reflect-metadata';
import { benchConfig } from './config.js';
import { counterDatabase, PG_DESIGNS, type PgDesign, runPgContention } from './postgres/pg-contention.js';
import { runProbe } from './probe-main.js';
import { fmt } from './stats.js';

async function main(): Promise<void> {
  const designs = (process.argv[2] ?? 'lease,lease-by-hand').split(',') as PgDesign[];
  for (const design of designs) if (!PG_DESIGNS.includes(design)) throw new Error(`no design '${design}': one of ${PG_DESIGNS.join(', ')}`);
  const config = { ...benchConfig(), rounds: Number(process.argv[3] ?? 3), contentionWindowMs: Number(process.env.BENCH_WINDOW_MS ?? 2000) };
  const db = await counterDatabase();
  try {
    const figures = await runPgContention(db.url, config, (line) => process.stdout.write(`${line}\n`), designs);
    for (const [design, f] of figures)
      process.stdout.write(
        `${design.padEnd(18)} ${fmt(f.throughput.median, 0).padStart(6)} holds/s, p99 ${fmt(f.p99.median, 1)} ms, ` +
          `client CPU per hold ${fmt(f.clientCpuPerHold.median, 2)} ms (main threads ${f.mainThreadCpuPerHold ? fmt(f.mainThreadCpuPerHold.median, 2) : '?'} ms)\n`,
      );
  } finally {
    await db.drop();
  }
}

runProbe(main);
