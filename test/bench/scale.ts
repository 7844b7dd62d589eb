/**
 * Scale section. Held locks: two processes on pools of 10, one holding 100 locks and one 10,000,
 * with the same lease; their renewals are measured in the same windows, round after round, from
 * `stats().renewal`. Big log table: acquire + release latency on a log table of a million terminal
 * rows against a fresh one, each in its own database and process, rounds interleaved.
 */
import type mysql from 'mysql2/promise';
import { resolveTargets } from '../../lib/core/lock-key.js';
import type { TestDatabase } from '../support/test-database.js';
import { LockWorker } from '../support/worker-host.js';
import type { BenchConfig } from './config.js';
import type { AcquiredMany, ReleasedMany, RenewalWindow } from './scenarios/scale.js';
import { type Figure, figure, hostNow } from './stats.js';

const SCENARIO = new URL('./scenarios/scale.js', import.meta.url).href;
/** Short lease so several renewals fall in each window (renewed every lease / 3). */
export const SCALE_LEASE_MS = 3000;
export const SCALE_POOL = 10;
export const SMALL_HELD = 100;

export interface HeldSet {
  acquired: AcquiredMany;
  windows: RenewalWindow[];
  released: ReleasedMany;
  /** Time spent renewing per second of window, ms/s (stats().renewal). */
  renewingPerSecond: Figure;
  /** Of which in the renewal round trip itself, ms/s. */
  statementPerSecond: Figure;
  renewalsPerSecond: Figure;
  /** Mean duration of one renewal statement per window, ms. */
  msPerRenewal: Figure;
  renewedLocksPerSecond: Figure;
  failures: number;
}

export interface HeldLocksResult {
  small: HeldSet;
  large: HeldSet;
  leaseMs: number;
  poolSize: number;
}

function heldSet(acquired: AcquiredMany, windows: RenewalWindow[], released: ReleasedMany): HeldSet {
  const perSecond = (w: RenewalWindow, v: number): number => v / (w.windowMs / 1000);
  return {
    acquired,
    windows,
    released,
    renewingPerSecond: figure(windows.map((w) => perSecond(w, w.renewingMs))),
    statementPerSecond: figure(windows.map((w) => perSecond(w, w.statementMs))),
    renewalsPerSecond: figure(windows.map((w) => perSecond(w, w.renewals))),
    msPerRenewal: figure(windows.map((w) => (w.renewals > 0 ? w.renewingMs / w.renewals : NaN))),
    renewedLocksPerSecond: figure(windows.map((w) => perSecond(w, w.renewedLocks))),
    failures: windows.reduce((s, w) => s + w.failures, 0),
  };
}

/**
 * The keys' rows, created up front as for any key used before: the figure is the steady-state
 * acquire, not a first use (which also creates the rows, in a transaction of its own).
 */
async function createKeyRows(admin: mysql.Connection, prefix: string, count: number): Promise<void> {
  for (let from = 0; from < count; from += 1000) {
    const keys = Array.from({ length: Math.min(1000, count - from) }, (_, i) => resolveTargets(`${prefix}:${from + i}`, 'write', '')[0]!.bytes);
    await admin.query(`INSERT INTO db_lock (lock_key, fencing_token) VALUES ${keys.map(() => '(?, 0)').join(', ')}`, keys);
  }
}

export async function runHeldLocks(db: TestDatabase, config: BenchConfig, log: (line: string) => void): Promise<HeldLocksResult> {
  // The janitor is off in both: the figure is the renewal's, and both processes run alike.
  const options = { poolSize: SCALE_POOL, leaseMs: SCALE_LEASE_MS, slowThresholdMs: 2_147_483_647, janitor: false as const };
  const workers = await LockWorker.startMany(2, { settings: db.settings, options }, { execArgv: ['--expose-gc'] });
  try {
    const [small, large] = workers as [LockWorker, LockWorker];
    await createKeyRows(db.admin, 'bench:held-small', SMALL_HELD);
    await createKeyRows(db.admin, 'bench:held-large', config.heldLocks);
    const acquire = (w: LockWorker, count: number, prefix: string) =>
      w.run<AcquiredMany>(SCENARIO, 'acquireMany', { count, prefix, concurrency: 40 });
    const smallAcquired = await acquire(small, SMALL_HELD, 'bench:held-small');
    const largeAcquired = await acquire(large, config.heldLocks, 'bench:held-large');
    log(`  acquired ${SMALL_HELD} in ${Math.round(smallAcquired.acquireMs)} ms, ${config.heldLocks} in ${Math.round(largeAcquired.acquireMs)} ms`);
    const windows: [RenewalWindow[], RenewalWindow[]] = [[], []];
    // One window unmeasured first: the large set's first renewals may still be catching up.
    await Promise.all(workers.map((w) => w.run(SCENARIO, 'renewalWindow', { windowMs: 1000 })));
    for (let r = 0; r < config.rounds; r++) {
      const [a, b] = await Promise.all(workers.map((w) => w.run<RenewalWindow>(SCENARIO, 'renewalWindow', { windowMs: config.renewalWindowMs })));
      windows[0].push(a!);
      windows[1].push(b!);
      log(
        `  renewal round ${r + 1}/${config.rounds}: ${SMALL_HELD} locks ${a!.renewingMs.toFixed(1)} ms in ${a!.renewals}; ${config.heldLocks} locks ${b!.renewingMs.toFixed(1)} ms in ${b!.renewals}`,
      );
    }
    const [smallReleased, largeReleased] = await Promise.all(workers.map((w) => w.run<ReleasedMany>(SCENARIO, 'releaseMany', { concurrency: 40 })));
    return {
      small: heldSet(smallAcquired, windows[0], smallReleased!),
      large: heldSet(largeAcquired, windows[1], largeReleased!),
      leaseMs: SCALE_LEASE_MS,
      poolSize: SCALE_POOL,
    };
  } finally {
    await Promise.all(workers.map((w) => w.close()));
  }
}

export interface LogTableResult {
  rows: number;
  fillMs: number;
  empty: Figure;
  big: Figure;
  hotKeyRows: number;
}

/** Fills the log table with `rows` terminal rows by INSERT … SELECT doubling: half on the measured key (a hot key's history), half over 1,000 keys. */
async function fillLog(admin: mysql.Connection, rows: number): Promise<number> {
  const t0 = hostNow();
  const columns = 'lock_key, mode, owner, holder, fencing_token, status, lease_ms, acquired_at, expires_at, ended_at, wait_ms, hold_ms';
  const values =
    // Tokens unique per key, as every lease row's are (the claim index refuses a key's token twice).
    "IF(RAND() < 0.5, 'bench:logtable', CONCAT('bulk:', FLOOR(RAND() * 1000))), 'write', UUID(), 'bench:1', (@bench_fill := @bench_fill + 1), " +
    "IF(RAND() < 0.9, 'RELEASED', 'EXPIRED'), 30000, UTC_TIMESTAMP(6) - INTERVAL 1 DAY, UTC_TIMESTAMP(6) - INTERVAL 1 DAY, " +
    'UTC_TIMESTAMP(6) - INTERVAL 1 DAY, 0, 5';
  await admin.query('SET @bench_fill = 0');
  await admin.query(`INSERT INTO db_lock_log (${columns}) SELECT ${values}`);
  let count = 1;
  while (count < rows) {
    const add = Math.min(count, rows - count);
    await admin.query(`INSERT INTO db_lock_log (${columns}) SELECT ${values} FROM db_lock_log LIMIT ${add}`);
    count += add;
  }
  await admin.query('ANALYZE TABLE db_lock_log');
  return hostNow() - t0;
}

export async function runLogTable(empty: TestDatabase, big: TestDatabase, config: BenchConfig, log: (line: string) => void): Promise<LogTableResult> {
  const fillMs = await fillLog(big.admin, config.logRows);
  const [[counts]] = (await big.admin.query("SELECT COUNT(*) AS n, SUM(lock_key = 'bench:logtable') AS hot FROM db_lock_log")) as unknown as [
    [{ n: number; hot: string }],
  ];
  log(`  filled ${counts.n} log rows in ${Math.round(fillMs)} ms`);
  const workers = await Promise.all([LockWorker.start({ settings: empty.settings }), LockWorker.start({ settings: big.settings })]);
  try {
    const perRound: [number[], number[]] = [[], []];
    const args = { key: 'bench:logtable', ops: config.opsPerRound };
    for (const w of workers) await w.run(SCENARIO, 'acquireReleaseRound', { ...args, ops: 30 });
    for (let r = 0; r < config.rounds; r++) {
      for (let i = 0; i < 2; i++) perRound[i]!.push(await workers[i]!.run<number>(SCENARIO, 'acquireReleaseRound', args));
    }
    return { rows: Number(counts.n), fillMs, empty: figure(perRound[0]), big: figure(perRound[1]), hotKeyRows: Number(counts.hot) };
  } finally {
    await Promise.all(workers.map((w) => w.close()));
  }
}
