import 'reflect-metadata';
import { setTimeout as sleep } from 'node:timers/promises';
import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { LockService, Semaphore } from '../../../lib/index.js';
import type { WorkerContext } from '../../support/lock-worker.js';
import { runSql } from '../../support/portable-sql.js';

/** Business table of the semaphore tests: callers inside now, and the most ever inside, per run (updated under its row lock). */
export const INSIDE_TABLE = 'sem_inside';

export interface CrowdArgs {
  key: string;
  /** The semaphore's limit; 0: the negative control, no semaphore at all. */
  limit: number;
  run: number;
  callers: number;
  iterations: number;
  /** Time inside, in ms. */
  holdMs: number;
}

export interface CrowdResult {
  sections: number;
  tokens: number[];
}

/**
 * `callers` loops of `iterations` entries each, under one permit of `key` (or none): on entry one
 * autocommitted UPDATE counts the caller in and raises the peak in the same row-locked statement
 * (the assignments run left to right), on exit another counts it out. The peak is what the
 * database saw, whatever the processes' clocks.
 */
export async function crowd(ctx: WorkerContext<CrowdArgs>): Promise<CrowdResult> {
  const { key, limit, run, callers, iterations, holdMs } = ctx.args;
  const dataSource = ctx.app.get(DataSource);
  const tokens: number[] = [];
  const inside = async (): Promise<void> => {
    await runSql(dataSource, `UPDATE ${INSIDE_TABLE} SET peak = GREATEST(peak, n + 1), n = n + 1 WHERE run = ?`, [run]);
    await sleep(holdMs);
    await runSql(dataSource, `UPDATE ${INSIDE_TABLE} SET n = n - 1 WHERE run = ?`, [run]);
  };
  const loop = async (): Promise<void> => {
    for (let i = 0; i < iterations; i++) {
      if (limit === 0) await inside();
      else
        await ctx.locks.withSemaphore(key, limit, async (permit) => {
          tokens.push(permit.fencingToken);
          await inside();
        });
    }
  };
  await Promise.all(Array.from({ length: callers }, loop));
  return { sections: callers * iterations, tokens };
}

/** Takes `count` permits of `key` and keeps them (until the process dies); emits 'held' with their tokens. */
export async function holdPermits(ctx: WorkerContext<{ key: string; limit: number; count: number; leaseMs: number }>): Promise<void> {
  const { key, limit, count, leaseMs } = ctx.args;
  const tokens: number[] = [];
  for (let i = 0; i < count; i++) tokens.push((await ctx.locks.acquireSemaphore(key, limit, { leaseMs, timeoutMs: 10_000 })).fencingToken);
  ctx.emit('held', tokens);
  await new Promise(() => undefined);
}

/** One permit of `key`, waited for: its token, and when it was granted by this process's count. */
export async function takePermit(ctx: WorkerContext<{ key: string; limit: number; timeoutMs: number }>): Promise<{ token: number; limit: number }> {
  const { key, limit, timeoutMs } = ctx.args;
  const permit = await ctx.locks.acquireSemaphore(key, limit, { timeoutMs, leaseMs: 5_000 });
  await permit.release();
  return { token: permit.fencingToken, limit: permit.limit };
}

/** Asks for a permit with `limit`: the error's name and fields, if any. */
export async function askWithLimit(ctx: WorkerContext<{ key: string; limit: number }>): Promise<{ error?: string; currentLimit?: number | null }> {
  try {
    const permit = await ctx.locks.acquireSemaphore(ctx.args.key, ctx.args.limit, { timeoutMs: 0 });
    await permit.release();
    return {};
  } catch (error) {
    return { error: (error as Error).name, currentLimit: (error as { currentLimit?: number | null }).currentLimit };
  }
}

/** Blocks the event loop (no renewal, no timer), like a long GC pause; the parent SIGSTOPs the process meanwhile. */
function stall(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    /* busy */
  }
}

@Injectable()
export class PermitWriter {
  constructor(readonly locks: LockService) {}

  /** A business write under one of 2 permits, in the fenced transaction, then a stall before the commit. */
  @Semaphore('sem-fence:{0}', 2, { timeoutMs: 20_000 })
  async write(key: string, writer: string, stallMs: number, emit: (event: string) => void): Promise<number> {
    const token = this.locks.currentLock!.fencingToken;
    emit('granted');
    await runSql(this.locks.manager, 'INSERT INTO sem_writes (k, writer, token) VALUES (?, ?, ?)', [key, writer, token]);
    emit('wrote');
    if (stallMs > 0) stall(stallMs);
    return token;
  }
}

export const providers = [PermitWriter];

type Outcome = { outcome: 'committed'; token: number } | { outcome: 'lost'; message: string };

/** One call of the decorated method; LockLostError is an outcome. */
export async function writeOnce(ctx: WorkerContext<{ key: string; writer: string; stallMs: number }>): Promise<Outcome> {
  try {
    const token = await ctx.app.get(PermitWriter).write(ctx.args.key, ctx.args.writer, ctx.args.stallMs, (event) => ctx.emit(event));
    return { outcome: 'committed', token };
  } catch (error) {
    if ((error as Error)?.name !== 'LockLostError') throw error;
    return { outcome: 'lost', message: (error as Error).message };
  }
}
