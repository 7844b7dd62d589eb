import type { LockHandle } from '../../../lib/index.js';
import type { WorkerContext } from '../../support/lock-worker.js';

export interface HoldArgs {
  key: string;
  leaseMs?: number;
  timeoutMs?: number;
}

export interface HoldResult {
  fencingToken: number;
  /** Lease end the handle reports (server clock), ms since epoch. */
  expiresAt: number;
  /** Monotonic ms this process waited for the grant. */
  waitedMs: number;
}

/** Acquires `key` and keeps it (the watchdog renews it) until the test kills or stops the process. */
export async function acquireAndKeep(ctx: WorkerContext<HoldArgs>): Promise<HoldResult> {
  const { result } = await take(ctx);
  return result;
}

/** Waits for `key` (emitting 'asking' first), then releases it at once. */
export async function acquireAndRelease(ctx: WorkerContext<HoldArgs>): Promise<HoldResult> {
  const { lock, result } = await take(ctx);
  await lock.release();
  return result;
}

async function take(ctx: WorkerContext<HoldArgs>): Promise<{ lock: LockHandle; result: HoldResult }> {
  const askedAt = performance.now();
  ctx.emit('asking');
  const lock = await ctx.locks.acquire(ctx.args.key, { leaseMs: ctx.args.leaseMs, timeoutMs: ctx.args.timeoutMs });
  return {
    lock,
    result: { fencingToken: lock.fencingToken, expiresAt: lock.expiresAt.getTime(), waitedMs: performance.now() - askedAt },
  };
}

export interface StaleOutcome {
  fencingToken: number;
  signalAborted: boolean;
  abortReason: string | undefined;
  extendError: { name: string; key?: string; fencingToken?: number } | null;
  releaseError: { name: string; key?: string; fencingToken?: number } | null;
}

/**
 * Acquires `key`, emits 'acquired', then waits until its lock is lost (the test SIGSTOPs this
 * process past the lease and lets another holder take over, then SIGCONTs it). Then it tries,
 * as a stale holder, to extend and release, and reports what happened.
 */
export async function holdUntilLost(ctx: WorkerContext<HoldArgs>): Promise<StaleOutcome> {
  const lock = await ctx.locks.acquire(ctx.args.key, { leaseMs: ctx.args.leaseMs });
  ctx.emit('acquired', { fencingToken: lock.fencingToken });
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('the lock was never reported lost')), 30_000);
    lock.signal.addEventListener('abort', () => {
      clearTimeout(timer);
      resolve();
    });
  });
  const describeError = (error: unknown): StaleOutcome['extendError'] => {
    const e = error as { name: string; key?: string; fencingToken?: number };
    return { name: e.name, key: e.key, fencingToken: e.fencingToken };
  };
  const extendError = await lock.extend().then(() => null, describeError);
  const releaseError = await lock.release().then(() => null, describeError);
  return {
    fencingToken: lock.fencingToken,
    signalAborted: lock.signal.aborted,
    abortReason: (lock.signal.reason as Error | undefined)?.name,
    extendError,
    releaseError,
  };
}
