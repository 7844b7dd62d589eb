/**
 * Scale section: many locks held by one process on a pool of 10 (memory, renewal statements per
 * second, renewal tick time, 100 locks as the floor), and acquire latency with a big log table.
 */
import type mysql from 'mysql2/promise';
import { LockWorker } from '../support/worker-host.js';
import type { TestDatabase } from '../support/test-database.js';
import type { BenchConfig } from './config.js';
import type { HoldManyResult } from './scenarios/scale.js';
import { type Figure, figure, hostNow, median } from './stats.js';

const SCENARIO = new URL('./scenarios/scale.js', import.meta.url).href;

export interface HeldLocksResult {
  small: HoldManyResult;
  large: HoldManyResult;
  leaseMs: number;
  poolSize: number;
}

/** Short lease so renewals happen during the window: renew every lease/3. */
const SCALE_LEASE_MS = 3000;
const SCALE_POOL = 10;

export async function runHeldLocks(db: TestDatabase, config: BenchConfig, log: (line: string) => void): Promise<HeldLocksResult> {
  const worker = await LockWorker.start(
    { settings: db.settings, options: { poolSize: SCALE_POOL, leaseMs: SCALE_LEASE_MS, slowThresholdMs: 2_147_483_647 } },
    { execArgv: ['--expose-gc'] },
  );
  try {
    const windowMs = config.quick ? 3500 : 6500;
    const run = (count: number, prefix: string): Promise<HoldManyResult> =>
      worker.run<HoldManyResult>(SCENARIO, 'holdMany', { count, prefix, windowMs, concurrency: 40 });
    await run(200, 'bench:warm');
    const small = await run(100, 'bench:held100');
    log(`  held 100: ${small.renewalStatements} renewals in ${Math.round(small.windowMs)} ms, ${median(small.renewMs).toFixed(1)} ms each`);
    const large = await run(config.heldLocks, 'bench:held');
    log(
      `  held ${config.heldLocks}: acquired in ${Math.round(large.acquireMs)} ms, ${large.renewalStatements} renewals in ` +
        `${Math.round(large.windowMs)} ms, ${median(large.renewMs).toFixed(1)} ms each, lost ${large.lost}`,
    );
    return { small, large, leaseMs: SCALE_LEASE_MS, poolSize: SCALE_POOL };
  } finally {
    await worker.close();
  }
}

export interface LogTableResult {
  rows: number;
  fillMs: number;
  empty: Figure;
  big: Figure;
  hotKeyRows: number;
}

/**
 * Fills `big`'s log table with `rows` terminal rows by INSERT … SELECT doubling: half on the
 * measured key itself (a hot key's long history), half spread over 1,000 other keys.
 */
async function fillLog(admin: mysql.Connection, rows: number): Promise<number> {
  const t0 = hostNow();
  const columns = 'lock_key, mode, owner, holder, fencing_token, status, lease_ms, acquired_at, expires_at, ended_at, wait_ms, hold_ms';
  const values =
    "IF(RAND() < 0.5, 'bench:logtable', CONCAT('bulk:', FLOOR(RAND() * 1000))), 'write', UUID(), 'bench:1', 1, " +
    "IF(RAND() < 0.9, 'RELEASED', 'EXPIRED'), 30000, UTC_TIMESTAMP(6) - INTERVAL 1 DAY, UTC_TIMESTAMP(6) - INTERVAL 1 DAY, " +
    'UTC_TIMESTAMP(6) - INTERVAL 1 DAY, 0, 5';
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
  const [[counts]] = (await big.admin.query(
    "SELECT COUNT(*) AS n, SUM(lock_key = 'bench:logtable') AS hot FROM db_lock_log",
  )) as unknown as [[{ n: number; hot: string }]];
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
