/**
 * Scenarios for the liveness tests, run inside worker processes. They reach a few
 * internals on purpose (the handle's owner token for the fence statement, the store to observe
 * renewals, the janitor to record its runs): tests only, never in lib/.
 */
import { DataSource } from 'typeorm';
import type { LockHandle } from '../../../lib/index.js';
import { fenceKeptStatement } from '../../../lib/store/mysql/hold.sql.js';
import { fenceKeptStatement as pgFenceKeptStatement } from '../../../lib/store/postgres/pg-fence.js';
import { dialectSql } from '../../support/dialect-sql.js';
import { runSql, typeOfQueryable } from '../../support/portable-sql.js';
import { rawSession } from '../../support/raw-session.js';
import { acquisitionIdOf, partsOf, processIdOf, rowIdsOf } from '../../support/lock-internals.js';
import type { WorkerContext } from '../../support/lock-worker.js';
import type { ConnectionSettings } from '../../support/test-database.js';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function until(check: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

/** Holds `key` with withLock for `workMs` (several leases) and records the work interval in server time. */
export async function longWork(
  ctx: WorkerContext<{ key: string; workMs: number; leaseMs: number; timeoutMs: number }>,
): Promise<{ token: number; aborted: boolean; renewals: number; renewalMaxMs: number; reason: string }> {
  const ds = ctx.app.get(DataSource);
  const sql = dialectSql(typeOfQueryable(ds));
  const before = ctx.locks.stats().renewals;
  return ctx.locks.withLock(
    ctx.args.key,
    async (lock) => {
      const [{ id }] = (await runSql(ds, `SELECT ${sql.uuid} AS id`)) as [{ id: string }];
      await runSql(ds, `INSERT INTO work_log (id, pid, token, started_at) VALUES (?, ?, ?, ${sql.utcNow})`, [id, process.pid, lock.fencingToken]);
      await sleep(ctx.args.workMs);
      await runSql(ds, `UPDATE work_log SET ended_at = ${sql.utcNow} WHERE id = ?`, [id]);
      const stats = ctx.locks.stats();
      return {
        token: lock.fencingToken,
        aborted: lock.signal.aborted,
        renewals: stats.renewals - before,
        renewalMaxMs: stats.renewal.maxMs,
        reason: String((lock.signal.reason as Error | undefined)?.message ?? ''),
      };
    },
    { leaseMs: ctx.args.leaseMs, timeoutMs: ctx.args.timeoutMs },
  );
}

/** The fence a fenced commit runs (each store's own statement): the holder's rows are written only while still live. */
function fenceKept(settings: ConnectionSettings, lock: LockHandle): { sql: string; parameters?: unknown[] } {
  if (settings.type !== 'postgres') return fenceKeptStatement(rowIdsOf(lock));
  return { sql: pgFenceKeptStatement(rowIdsOf(lock), acquisitionIdOf(lock)) };
}

/** Inserts a ledger row for `lock` in a transaction fenced by its log rows; true if it committed. */
async function fencedWrite(settings: ConnectionSettings, lock: LockHandle, who: string): Promise<boolean> {
  const connection = await rawSession(settings);
  try {
    // PostgreSQL's sessions are at READ COMMITTED already.
    if (settings.type !== 'postgres') await connection.query('SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED');
    await connection.begin();
    await connection.query('INSERT INTO ledger (who, token) VALUES (?, ?)', [who, lock.fencingToken]);
    const fence = fenceKept(settings, lock);
    const result = await connection.query<{ affectedRows: number }>(fence.sql, fence.parameters);
    if (result.affectedRows < rowIdsOf(lock).length) {
      await connection.rollback();
      return false;
    }
    await connection.commit();
    return true;
  } finally {
    await connection.end();
  }
}

interface VictimResult {
  aborted: boolean;
  abortReason: string;
  fenceCommitted: boolean;
  releaseError: string | null;
  renewalFailures: number;
  lost: number;
}

/**
 * Holds `key` and waits for its signal to abort (the test makes renewals fail). Then waits until
 * the test says another process took the key over (control row), tries a fenced write, releases.
 */
export async function victim(
  ctx: WorkerContext<{ key: string; leaseMs: number; business: ConnectionSettings; busyLoopMs?: number }>,
): Promise<VictimResult> {
  const lock = await ctx.locks.acquire(ctx.args.key, { leaseMs: ctx.args.leaseMs });
  ctx.emit('acquired', { owner: acquisitionIdOf(lock), processId: processIdOf(ctx.locks), token: lock.fencingToken });
  if (ctx.args.busyLoopMs) {
    const end = performance.now() + ctx.args.busyLoopMs;
    while (performance.now() < end) {
      /* the event loop is blocked: no renewal can run */
    }
  } else {
    await until(async () => lock.signal.aborted, 20_000, 'the lock signal to abort');
    ctx.emit('aborted');
  }
  const control = await rawSession(ctx.args.business);
  try {
    await until(
      async () => {
        const rows = await control.query<unknown[]>(`SELECT 1 FROM control WHERE name = ?`, [ctx.args.key]);
        return rows.length > 0;
      },
      20_000,
      'the takeover',
    );
  } finally {
    await control.end();
  }
  const fenceCommitted = await fencedWrite(ctx.args.business, lock, `victim:${process.pid}`);
  // With a blocked event loop the watchdog notices on its next tick.
  await until(async () => lock.signal.aborted, 10_000, 'the lock signal to abort');
  let releaseError: string | null = null;
  try {
    await lock.release();
  } catch (error) {
    releaseError = (error as Error).name;
  }
  const stats = ctx.locks.stats();
  return {
    aborted: lock.signal.aborted,
    abortReason: String((lock.signal.reason as Error)?.message),
    fenceCommitted,
    releaseError,
    renewalFailures: stats.renewalFailures,
    lost: stats.lost,
  };
}

/** Takes `key` (waiting), makes a fenced write and releases. */
export async function taker(
  ctx: WorkerContext<{ key: string; timeoutMs: number; business: ConnectionSettings }>,
): Promise<{ token: number; committed: boolean; waitedMs: number }> {
  const started = performance.now();
  const lock = await ctx.locks.acquire(ctx.args.key, { timeoutMs: ctx.args.timeoutMs });
  const waitedMs = performance.now() - started;
  ctx.emit('acquired', { token: lock.fencingToken });
  const committed = await fencedWrite(ctx.args.business, lock, `taker:${process.pid}`);
  await lock.release();
  return { token: lock.fencingToken, committed, waitedMs };
}

/**
 * Records every janitor run of this process (start and end, server time) in `janitor_runs`,
 * making each run last a little longer so overlapping runs could not go unseen, for `durationMs`.
 */
export async function observeJanitor(
  ctx: WorkerContext<{ durationMs: number; extraWorkMs: number }>,
): Promise<{ runs: number; skipped: number; recorded: number }> {
  const ds = ctx.app.get(DataSource);
  const janitor = partsOf(ctx.locks).janitor as unknown as { sweep: (...a: unknown[]) => Promise<boolean> };
  const sweep = janitor.sweep.bind(janitor);
  const sql = dialectSql(typeOfQueryable(ds));
  let recorded = 0;
  janitor.sweep = async (...args: unknown[]) => {
    const [{ id }] = (await runSql(ds, `SELECT ${sql.uuid} AS id`)) as [{ id: string }];
    await runSql(ds, `INSERT INTO janitor_runs (id, pid, started_at) VALUES (?, ?, ${sql.utcNow})`, [id, process.pid]);
    await sleep(ctx.args.extraWorkMs);
    const result = await sweep(...args);
    await runSql(ds, `UPDATE janitor_runs SET ended_at = ${sql.utcNow} WHERE id = ?`, [id]);
    recorded++;
    return result;
  };
  await sleep(ctx.args.durationMs);
  janitor.sweep = sweep;
  const stats = ctx.locks.stats().janitor;
  return { runs: stats.runs, skipped: stats.skipped, recorded };
}

/** Holds `key` in withLock until its signal aborts (or `maxMs`); reports how it ended. */
export async function holdUntilAborted(
  ctx: WorkerContext<{ key: string | string[]; leaseMs: number; maxMs: number }>,
): Promise<{ aborted: boolean; reason: string; withLockError: string | null; withLockMessage: string | null }> {
  let aborted = false;
  let reason = '';
  try {
    await ctx.locks.withLock(
      ctx.args.key,
      async (lock) => {
        ctx.emit('holding', { owner: acquisitionIdOf(lock), processId: processIdOf(ctx.locks), token: lock.fencingToken });
        await until(async () => lock.signal.aborted, ctx.args.maxMs, 'abort').catch(() => undefined);
        aborted = lock.signal.aborted;
        reason = String((lock.signal.reason as Error | undefined)?.message);
      },
      { leaseMs: ctx.args.leaseMs },
    );
    return { aborted, reason, withLockError: null, withLockMessage: null };
  } catch (error) {
    return { aborted, reason, withLockError: (error as Error).name, withLockMessage: (error as Error).message };
  }
}

/** Takes `key` and releases it, reporting the wait. */
export async function takeOnce(ctx: WorkerContext<{ key: string; timeoutMs: number }>): Promise<{ token: number; waitedMs: number }> {
  const started = performance.now();
  const lock = await ctx.locks.acquire(ctx.args.key, { timeoutMs: ctx.args.timeoutMs });
  const waitedMs = performance.now() - started;
  await lock.release();
  return { token: lock.fencingToken, waitedMs };
}

/** Acquires keys and keeps them (for listLocks). */
export async function holdKeys(ctx: WorkerContext<{ keys: string[]; leaseMs: number; mode?: 'read' | 'write' }>): Promise<number[]> {
  const tokens: number[] = [];
  for (const key of ctx.args.keys) tokens.push((await ctx.locks.acquire(key, { leaseMs: ctx.args.leaseMs, mode: ctx.args.mode })).fencingToken);
  return tokens;
}
