/** Scenarios for crash-stall-processes.test.ts and crash-stall-row-lock.test.ts, run inside worker processes. */
import { DataSource } from 'typeorm';
import type { LockKeys } from '../../../lib/index.js';
import type { WorkerContext } from '../../support/lock-worker.js';
import { runSql } from '../../support/portable-sql.js';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Acquires `keys` (any shape) and keeps them until the process is killed; emits 'held' with the tokens. */
export async function keep(ctx: WorkerContext<{ keys: LockKeys; leaseMs: number; strategy?: 'lease' | 'row-lock' }>): Promise<void> {
  const lock = await ctx.locks.acquire(ctx.args.keys, { leaseMs: ctx.args.leaseMs, timeoutMs: 10_000, strategy: ctx.args.strategy });
  ctx.emit('held', { tokens: Object.values(lock.fencingTokens) });
  await new Promise(() => undefined);
}

/** One permit, kept until the process is killed (emits 'held'), or released when `releaseAfterMs` passes. */
export async function keepPermit(
  ctx: WorkerContext<{ key: string; limit: number; leaseMs: number; releaseAfterMs?: number }>,
): Promise<{ token: number; aborted: boolean }> {
  const permit = await ctx.locks.acquireSemaphore(ctx.args.key, ctx.args.limit, { leaseMs: ctx.args.leaseMs, timeoutMs: 10_000 });
  ctx.emit('held', { token: permit.fencingToken });
  if (ctx.args.releaseAfterMs === undefined) await new Promise(() => undefined);
  await sleep(ctx.args.releaseAfterMs!);
  const aborted = permit.signal.aborted;
  await permit.release();
  return { token: permit.fencingToken, aborted };
}

/**
 * A fenced withLock call on `keys` that bumps a business counter per key (in its transaction) and
 * records `inside` +1/-1 on a separate connection, so overlapping holders show as inside > 1.
 */
export async function fencedBump(
  ctx: WorkerContext<{
    keys: LockKeys;
    counterKeys: string[];
    who: string;
    leaseMs: number;
    timeoutMs: number;
    holdMs: number;
    strategy?: 'lease' | 'row-lock';
  }>,
): Promise<{ tokens: number[]; outcome: string; message?: string }> {
  const ds = ctx.app.get(DataSource);
  const { keys, counterKeys, who, holdMs } = ctx.args;
  let tokens: number[] = [];
  try {
    await ctx.locks.runLocked(
      keys,
      async () => {
        const lock = ctx.locks.currentLock!;
        tokens = Object.values(lock.fencingTokens);
        await runSql(ds, 'UPDATE cs_inside SET peak = GREATEST(peak, n + 1), n = n + 1 WHERE id = 1');
        ctx.emit('granted', { tokens });
        await sleep(holdMs);
        const m = ctx.locks.manager;
        for (const k of counterKeys)
          await runSql(m, 'UPDATE cs_counter SET v = v + 1, last_token = ?, last_who = ? WHERE k = ?', [tokens[0], who, k]);
        await runSql(m, 'INSERT INTO cs_writes (who, token) VALUES (?, ?)', [who, tokens[0]]);
        await runSql(ds, 'UPDATE cs_inside SET n = n - 1 WHERE id = 1');
      },
      { leaseMs: ctx.args.leaseMs, timeoutMs: ctx.args.timeoutMs, strategy: ctx.args.strategy },
    );
    return { tokens, outcome: 'committed' };
  } catch (error) {
    await runSql(ds, 'UPDATE cs_inside SET n = n - 1 WHERE id = 1').catch(() => undefined);
    return { tokens, outcome: (error as Error).name, message: (error as Error).message };
  }
}

/**
 * Holds `key` under withLock (transaction 'none') and samples `signal.aborted` every 5 ms until it
 * is aborted. A sample that reads "not aborted" right after a gap longer than the lease (the
 * process was stopped) is a violation: the deadline had passed before the read.
 */
export async function sampleSignal(
  ctx: WorkerContext<{ key: string; leaseMs: number; maxMs: number }>,
): Promise<{ token: number; lateReads: { gapMs: number }[]; longestGap: number; aborted: boolean; release: string }> {
  let sampled: { token: number; lateReads: { gapMs: number }[]; longestGap: number; aborted: boolean } | undefined;
  const outcome = await ctx.locks
    .withLock(
      ctx.args.key,
      async (lock) => {
        ctx.emit('held', { token: lock.fencingToken });
        const lateReads: { gapMs: number }[] = [];
        let longestGap = 0;
        let previous = performance.now();
        const end = previous + ctx.args.maxMs;
        for (;;) {
          await sleep(5);
          const before = performance.now();
          const aborted = lock.signal.aborted;
          const gap = before - previous;
          longestGap = Math.max(longestGap, gap);
          if (!aborted && gap > ctx.args.leaseMs) lateReads.push({ gapMs: Math.round(gap) });
          if (aborted || before > end) return (sampled = { token: lock.fencingToken, lateReads, longestGap: Math.round(longestGap), aborted });
          previous = performance.now();
        }
      },
      { leaseMs: ctx.args.leaseMs },
    )
    .then(
      () => 'released',
      (error: Error) => error.name,
    );
  return { ...sampled!, release: outcome };
}
