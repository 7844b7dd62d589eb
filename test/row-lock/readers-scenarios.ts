import type { LockHandle, LockStrategyName } from '../../lib/index.js';
import type { WorkerContext } from '../support/lock-worker.js';

const held = new Map<string, LockHandle>();

export interface TakeArgs {
  id: string;
  keys: string | { key: string; mode: 'read' | 'write' }[];
  mode?: 'read' | 'write';
  timeoutMs?: number;
  leaseMs?: number;
  strategy?: LockStrategyName;
}

export interface Outcome {
  ok: boolean;
  fencingToken?: number;
  tokens?: Record<string, number>;
  error?: string;
  waitedMs: number;
}

/** Acquires and keeps the handle under `id` (emitting 'asking' first and 'acquired' after). */
export async function take(ctx: WorkerContext<TakeArgs>): Promise<Outcome> {
  const { id, keys, mode, timeoutMs, leaseMs, strategy } = ctx.args;
  const started = performance.now();
  ctx.emit('asking');
  try {
    const lock = await ctx.locks.acquire(keys as never, { mode, timeoutMs, leaseMs, strategy });
    held.set(id, lock);
    ctx.emit('acquired', { fencingToken: lock.fencingToken });
    return { ok: true, fencingToken: lock.fencingToken, tokens: { ...lock.fencingTokens }, waitedMs: performance.now() - started };
  } catch (error) {
    return { ok: false, error: `${(error as Error).name}: ${(error as Error).message}`, waitedMs: performance.now() - started };
  }
}

/** Releases the handle kept under `id`. */
export async function release(ctx: WorkerContext<{ id: string }>): Promise<{ ok: boolean; error?: string; signalAborted: boolean }> {
  const lock = held.get(ctx.args.id);
  if (!lock) throw new Error(`no handle ${ctx.args.id}`);
  held.delete(ctx.args.id);
  const signalAborted = lock.signal.aborted;
  try {
    await lock.release();
    return { ok: true, signalAborted };
  } catch (error) {
    return { ok: false, error: `${(error as Error).name}: ${(error as Error).message}`, signalAborted };
  }
}
