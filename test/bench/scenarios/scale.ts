/** Child-process side of the scale section (run with --expose-gc for the memory figures). */
import type { WorkerContext } from '../../support/lock-worker.js';
import type { LockHandle } from '../../../lib/index.js';
import { hostNow, median } from '../stats.js';

export interface HoldManyResult {
  count: number;
  acquireMs: number;
  heapBytesPerLock: number;
  rssBytesPerLock: number;
  windowMs: number;
  renewalStatements: number;
  renewedLocks: number;
  renewalFailures: number;
  /** Duration of each renewal statement sent in the window, ms. */
  renewMs: number[];
  lost: number;
  held: number;
  releaseMs: number;
  roundTripsPerLock: number;
}

function collect(): void {
  const gc = (globalThis as { gc?: () => void }).gc;
  gc?.();
  gc?.();
}

/**
 * Takes `count` distinct keys (at most `concurrency` acquisitions in flight), holds them for
 * `windowMs` while the watchdog renews them (timing each renewal statement), then releases
 * everything.
 */
export async function holdMany(
  ctx: WorkerContext<{ count: number; prefix: string; windowMs: number; concurrency: number }>,
): Promise<HoldManyResult> {
  const { count, prefix, windowMs, concurrency } = ctx.args;
  const locks = ctx.locks;
  collect();
  const heap0 = process.memoryUsage().heapUsed;
  const rss0 = process.memoryUsage().rss;
  const rt0 = locks.stats().roundTrips;
  const handles: LockHandle[] = [];
  const t0 = hostNow();
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count) {
        const i = next++;
        handles.push(await locks.acquire(`${prefix}:${i}`, { timeoutMs: 60_000 }));
      }
    }),
  );
  const acquireMs = hostNow() - t0;
  const roundTripsPerLock = (locks.stats().roundTrips - rt0) / count;
  collect();
  const heap1 = process.memoryUsage().heapUsed;
  const rss1 = process.memoryUsage().rss;

  // Time every renewal statement the watchdog sends during the window (wrapping the store's
  // renew on this instance; internal, the bench only).
  const store = (locks as unknown as { engine: { store: { renew: (...a: unknown[]) => Promise<unknown> } } }).engine.store;
  const renew = store.renew;
  const renewMs: number[] = [];
  store.renew = async (...a: unknown[]) => {
    const started = hostNow();
    try {
      return await renew.apply(store, a);
    } finally {
      renewMs.push(hostNow() - started);
    }
  };
  const s0 = locks.stats();
  const w0 = hostNow();
  await new Promise((r) => setTimeout(r, windowMs));
  const s1 = locks.stats();
  const measuredWindow = hostNow() - w0;
  store.renew = renew;
  const held = locks.stats().held;
  const lost = handles.filter((h) => h.signal.aborted).length;

  const r0 = hostNow();
  next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < handles.length) await handles[next++]!.release();
    }),
  );
  const releaseMs = hostNow() - r0;
  return {
    count,
    acquireMs,
    heapBytesPerLock: (heap1 - heap0) / count,
    rssBytesPerLock: (rss1 - rss0) / count,
    windowMs: measuredWindow,
    renewalStatements: s1.renewals - s0.renewals,
    renewedLocks: s1.renewedLocks - s0.renewedLocks,
    renewalFailures: s1.renewalFailures - s0.renewalFailures,
    renewMs,
    lost,
    held,
    releaseMs,
    roundTripsPerLock,
  };
}

/** `ops` sequential exclusive acquire + release of `key`; returns the median latency in ms. */
export async function acquireReleaseRound(ctx: WorkerContext<{ key: string; ops: number }>): Promise<number> {
  const samples: number[] = [];
  for (let i = 0; i < ctx.args.ops; i++) {
    const t0 = hostNow();
    const lock = await ctx.locks.acquire(ctx.args.key);
    await lock.release();
    samples.push(hostNow() - t0);
  }
  return median(samples);
}
