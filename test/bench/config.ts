/**
 * Round counts and durations of `npm run bench`. BENCH_QUICK=1 gives a ~1-2 minute run for
 * development; the defaults are the documented run (< 10 minutes on a 2-core box). Each figure
 * is a median over `rounds` rounds, designs interleaved round by round so drifting background
 * load hits every design alike.
 */
export interface BenchConfig {
  readonly quick: boolean;
  /** Rounds per figure (median and spread over these). */
  readonly rounds: number;
  /** Sequential operations per round in the uncontended section. */
  readonly opsPerRound: number;
  /** Measured window of one contention round, in ms. */
  readonly contentionWindowMs: number;
  readonly processes: number;
  readonly callersPerProcess: number;
  /** Locks held at once in the scale section. */
  readonly heldLocks: number;
  /** Terminal log rows bulk-inserted for the big-table figure (rounded up to a power of two). */
  readonly logRows: number;
  /** Where the report goes. */
  readonly output: string;
}

function int(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 1) throw new Error(`${name} must be a positive integer, got '${raw}'`);
  return value;
}

export function benchConfig(): BenchConfig {
  const quick = process.env.BENCH_QUICK === '1';
  return Object.freeze({
    quick,
    rounds: int('BENCH_ROUNDS', quick ? 3 : 5),
    opsPerRound: int('BENCH_OPS', quick ? 100 : 300),
    contentionWindowMs: int('BENCH_WINDOW_MS', quick ? 1500 : 3000),
    processes: int('BENCH_PROCESSES', 4),
    callersPerProcess: int('BENCH_CALLERS', 4),
    heldLocks: int('BENCH_HELD_LOCKS', quick ? 10_000 : 10_000),
    logRows: int('BENCH_LOG_ROWS', quick ? 131_072 : 1_000_000),
    output: process.env.BENCH_OUTPUT ?? 'docs/benchmarks.md',
  });
}
