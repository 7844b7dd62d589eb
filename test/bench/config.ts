/**
 * Knobs of `npm run bench` (every one is listed in the report's header and in docs/guide/running-benchmarks.md).
 * BENCH_QUICK=1 gives a ~2–3 minute indicative run; the defaults are the documented run. Each
 * figure is a median over `rounds` rounds, designs interleaved (uncontended ops in blocks of 10,
 * contention rounds round by round) so drifting background load hits every design alike.
 */
export const SECTIONS = ['uncontended', 'contention', 'semaphore', 'scale', 'postgres'] as const;
export type Section = (typeof SECTIONS)[number];

export interface BenchConfig {
  readonly quick: boolean;
  /** Sections to run (BENCH_SECTIONS, comma-separated); the others are reported as not run. */
  readonly sections: readonly Section[];
  /** Rounds per figure (median and min–max over these). */
  readonly rounds: number;
  /** Sequential operations per round in the uncontended section. */
  readonly opsPerRound: number;
  /** Measured window of one contention round, in ms. */
  readonly contentionWindowMs: number;
  /**
   * Unrecorded warm-up before the measured rounds, in ms: per design before each contention
   * variant; the uncontended section runs as many ops per item as fit in it (at least warmupOps).
   */
  readonly warmupMs: number;
  /**
   * Unrecorded ops of every uncontended item before its measured rounds (whole rounds, at least
   * this many), and holds of each library design per contention process before its first variant. V8 optimizes a function only after it has run a while, and the library's path is
   * long: a decorated row-lock call still got faster after 4,000 calls (1.9× → 1.4× a plain
   * transaction over its first 4,500 on this host; with V8's tier-up threshold lowered, 1.4× from
   * the first round), so a warm-up by time alone, shared by twenty items, measured cold code.
   */
  readonly warmupOps: number;
  readonly processes: number;
  readonly callersPerProcess: number;
  /** Locks held at once in the scale section. */
  readonly heldLocks: number;
  /** Measured window of one renewal round in the scale section, in ms. */
  readonly renewalWindowMs: number;
  /** Terminal log rows bulk-inserted for the big-table figure (rounded up to a power of two). */
  readonly logRows: number;
  /** Where the report goes. */
  readonly output: string;
}

/** Every knob with its default (quick default) and meaning, for the report and the notes. */
export const KNOBS: readonly [name: string, defaults: string, meaning: string][] = [
  ['BENCH_QUICK', 'unset', '`1`: short indicative run (the defaults in parentheses)'],
  [
    'BENCH_SECTIONS',
    'uncontended,contention,semaphore,scale,postgres',
    'sections to run, comma-separated; the targets of the others read "not measured"',
  ],
  ['BENCH_ROUNDS', '5 (3)', 'rounds per figure (median, min–max)'],
  ['BENCH_OPS', '300 (100)', 'sequential operations per uncontended round'],
  ['BENCH_WINDOW_MS', '3000 (1500)', 'measured window of one contention round, ms'],
  [
    'BENCH_WARMUP_MS',
    '3000 (1000)',
    "unrecorded warm-up, ms: per design before each contention variant, and the uncontended section's (ops of every item until it has lasted this long, and at least `BENCH_WARMUP_OPS`): the figures are of warm code, as in a process that has run a while",
  ],
  [
    'BENCH_WARMUP_OPS',
    '5000 (1000)',
    "unrecorded ops of every uncontended item before its measured rounds (whole rounds), and holds of each of the library's designs per contention process (MySQL and PostgreSQL) before it is measured: V8 optimizes the library's long call path only after a few thousand calls",
  ],
  [
    'BENCH_PROCESSES / BENCH_CALLERS',
    '4 / 4',
    'contention: processes × callers on one key (row-lock callers wait on DataSource connections: at most 5 per process with the pool of 10)',
  ],
  ['BENCH_HELD_LOCKS', '10000', 'locks held at once in the scale section'],
  ['BENCH_RENEWAL_WINDOW_MS', '3000 (2000)', 'measured window of one renewal round, ms'],
  ['BENCH_LOG_ROWS', '1000000 (131072)', 'terminal log rows for the big-table figure'],
  ['BENCH_OUTPUT', 'docs/benchmarks.md', 'report path'],
  ['DB_LOCK_TEST_URL', 'mysql://root@127.0.0.1:3306', 'the database server (throw-away databases `dblock_bench_*` are created and dropped)'],
  ['BENCH_REDIS_URL', 'redis://127.0.0.1:6379', 'Redis for node-redlock'],
];

function int(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 1) throw new Error(`${name} must be a positive integer, got '${raw}'`);
  return value;
}

function sections(): Section[] {
  const raw = process.env.BENCH_SECTIONS;
  if (raw === undefined || raw.trim() === '') return [...SECTIONS];
  const picked = raw
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const unknown = picked.filter((s) => !SECTIONS.includes(s as Section));
  if (unknown.length > 0 || picked.length === 0) throw new Error(`BENCH_SECTIONS takes ${SECTIONS.join(', ')} (comma-separated), got '${raw}'`);
  return SECTIONS.filter((s) => picked.includes(s));
}

export function benchConfig(): BenchConfig {
  const quick = process.env.BENCH_QUICK === '1';
  return Object.freeze({
    quick,
    sections: sections(),
    rounds: int('BENCH_ROUNDS', quick ? 3 : 5),
    opsPerRound: int('BENCH_OPS', quick ? 100 : 300),
    contentionWindowMs: int('BENCH_WINDOW_MS', quick ? 1500 : 3000),
    warmupMs: int('BENCH_WARMUP_MS', quick ? 1000 : 3000),
    warmupOps: int('BENCH_WARMUP_OPS', quick ? 1000 : 5000),
    processes: int('BENCH_PROCESSES', 4),
    callersPerProcess: int('BENCH_CALLERS', 4),
    heldLocks: int('BENCH_HELD_LOCKS', 10_000),
    renewalWindowMs: int('BENCH_RENEWAL_WINDOW_MS', quick ? 2000 : 3000),
    logRows: int('BENCH_LOG_ROWS', quick ? 131_072 : 1_000_000),
    output: process.env.BENCH_OUTPUT ?? 'docs/benchmarks.md',
  });
}
