import { setTimeout as sleep } from 'node:timers/promises';
import type { WorkerContext } from '../../support/lock-worker.js';

export interface SemaphoreLoadArgs {
  key: string;
  /** 0: the same work under a write lock; N: under one of N permits. */
  limit: number;
  callers: number;
  windowMs: number;
  /** Work inside, in ms. */
  workMs: number;
}

/** `callers` loops entering `key` for `windowMs`: how many entries completed. */
export async function semaphoreLoad(ctx: WorkerContext<SemaphoreLoadArgs>): Promise<number> {
  const { key, limit, callers, windowMs, workMs } = ctx.args;
  const until = performance.now() + windowMs;
  let done = 0;
  const work = async (): Promise<void> => {
    await sleep(workMs);
    if (performance.now() < until) done++;
  };
  const loop = async (): Promise<void> => {
    while (performance.now() < until) {
      if (limit === 0) await ctx.locks.withLock(key, work, { timeoutMs: Infinity });
      else await ctx.locks.withSemaphore(key, limit, work, { timeoutMs: Infinity });
    }
  };
  await Promise.all(Array.from({ length: callers }, loop));
  return done;
}
