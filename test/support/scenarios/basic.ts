import type { WorkerContext } from '../lock-worker.js';

/** Holds `key` until told otherwise by timing: acquire, emit 'acquired', hold `holdMs`, release. */
export async function holdFor(ctx: WorkerContext<{ key: string; holdMs: number; leaseMs?: number; mode?: 'read' | 'write' }>): Promise<number> {
  const lock = await ctx.locks.acquire(ctx.args.key, { leaseMs: ctx.args.leaseMs, mode: ctx.args.mode });
  ctx.emit('acquired', { fencingToken: lock.fencingToken });
  await new Promise((r) => setTimeout(r, ctx.args.holdMs));
  await lock.release();
  return lock.fencingToken;
}

/** Acquires `key` and never releases it (the test kills the process). */
export async function acquireAndKeep(ctx: WorkerContext<{ key: string; leaseMs?: number; mode?: 'read' | 'write' }>): Promise<number> {
  const lock = await ctx.locks.acquire(ctx.args.key, { leaseMs: ctx.args.leaseMs, mode: ctx.args.mode });
  return lock.fencingToken;
}
