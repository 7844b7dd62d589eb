import { setTimeout as sleep } from 'node:timers/promises';
import { DbLockError, type LockStrategyName } from '../../lib/index.js';
import type { WorkerContext } from '../support/lock-worker.js';
import { shuffled } from '../support/shuffle.js';

export interface StormArgs {
  /** Wall-clock time (ms since epoch, the parent's clock) at which every caller starts: the barrier. */
  startAt: number;
  keys: string[];
  callers: number;
  /** Acquisitions per caller, each of `keysPerCall` random keys. */
  calls: number;
  keysPerCall: number;
  strategy: LockStrategyName;
  timeoutMs: number;
  transaction: 'requires-new' | 'none';
  /** Each caller takes every key once, one per call, in its own random order (`calls` and `keysPerCall` ignored). */
  everyKey?: boolean;
}

export interface StormResult {
  done: number;
  /** Per key: the fencing tokens this process was granted. */
  tokens: Record<string, number[]>;
  typed: Record<string, number>;
  untyped: string[];
  maxMs: number;
}

/** Callers that all start at one instant, each taking random sets of keys (first use of every key). */
export async function storm(ctx: WorkerContext<StormArgs>): Promise<StormResult> {
  const a = ctx.args;
  const result: StormResult = { done: 0, tokens: {}, typed: {}, untyped: [], maxMs: 0 };
  await sleep(Math.max(0, a.startAt - Date.now()));
  const caller = async (): Promise<void> => {
    const order = a.everyKey ? shuffled(a.keys) : [];
    for (let i = 0; i < (a.everyKey ? order.length : a.calls); i++) {
      const keys = a.everyKey ? [order[i]!] : Array.from({ length: a.keysPerCall }, () => a.keys[Math.floor(Math.random() * a.keys.length)]!);
      const started = performance.now();
      try {
        await ctx.locks.runLocked(
          keys,
          async () => {
            const lock = ctx.locks.currentLock!;
            for (const [key, token] of Object.entries(lock.fencingTokens)) (result.tokens[key] ??= []).push(token);
            if (a.transaction === 'requires-new') await ctx.locks.manager.query('SELECT 1');
          },
          { strategy: a.strategy, timeoutMs: a.timeoutMs, transaction: a.transaction },
        );
        result.done++;
      } catch (error) {
        if (error instanceof DbLockError) result.typed[error.name] = (result.typed[error.name] ?? 0) + 1;
        else if (result.untyped.length < 10) result.untyped.push(String((error as Error)?.stack ?? error).slice(0, 400));
      }
      result.maxMs = Math.max(result.maxMs, performance.now() - started);
    }
  };
  await Promise.all(Array.from({ length: a.callers }, caller));
  return result;
}
