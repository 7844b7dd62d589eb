/**
 * Worker side of the scale section (run with --expose-gc for the memory figures): take many
 * locks and keep them while the watchdog renews them, measuring renewal from `stats().renewal`;
 * and sequential acquire + release for the big log table figure.
 */
import type { LockHandle } from '../../../lib/index.js';
import { partsOf } from '../../support/lock-internals.js';
import type { WorkerContext } from '../../support/lock-worker.js';
import { hostNow, median } from '../stats.js';

export interface AcquiredMany {
  count: number;
  acquireMs: number;
  heapBytesPerLock: number;
  rssBytesPerLock: number;
  roundTripsPerLock: number;
}

export interface RenewalWindow {
  windowMs: number;
  /** Renewal statements sent in the window. */
  renewals: number;
  /** Leases they renewed. */
  renewedLocks: number;
  failures: number;
  /** Time spent renewing during the window, ms (from stats().renewal: count × mean). */
  renewingMs: number;
  /** Of which waiting for the renewal round trip itself, ms (timed around the lock log's renewal call: bench instrumentation). */
  statementMs: number;
}

export interface ReleasedMany {
  held: number;
  lost: number;
  releaseMs: number;
}

let handles: LockHandle[] = [];
/** Time spent in the lock log's renewal round trips so far, ms. */
let statementMs = 0;

/**
 * Times the renewal round trip alone (the process lease's renew), so the report can tell the
 * statement from the work around it that stats().renewal also covers. Bench-only instrumentation.
 */
function timeRenewalStatements(ctx: WorkerContext<unknown>): void {
  const log = partsOf(ctx.locks).store.processLease as unknown as { renew: (...args: unknown[]) => Promise<unknown>; __benchTimed?: boolean };
  if (log.__benchTimed) return;
  const original = log.renew.bind(log);
  log.renew = async (...args: unknown[]) => {
    const t0 = hostNow();
    try {
      return await original(...args);
    } finally {
      statementMs += hostNow() - t0;
    }
  };
  log.__benchTimed = true;
}

function collect(): void {
  const gc = (globalThis as { gc?: () => void }).gc;
  gc?.();
  gc?.();
}

/** Takes `count` distinct keys, at most `concurrency` acquisitions in flight. */
export async function acquireMany(ctx: WorkerContext<{ count: number; prefix: string; concurrency: number }>): Promise<AcquiredMany> {
  const { count, prefix, concurrency } = ctx.args;
  timeRenewalStatements(ctx);
  collect();
  const heap0 = process.memoryUsage().heapUsed;
  const rss0 = process.memoryUsage().rss;
  const trips0 = ctx.locks.stats().roundTripsBy.locks;
  const t0 = hostNow();
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count) {
        const i = next++;
        handles.push(await ctx.locks.acquire(`${prefix}:${i}`, { timeoutMs: 60_000 }));
      }
    }),
  );
  const acquireMs = hostNow() - t0;
  const roundTripsPerLock = (ctx.locks.stats().roundTripsBy.locks - trips0) / count;
  collect();
  return {
    count,
    acquireMs,
    heapBytesPerLock: (process.memoryUsage().heapUsed - heap0) / count,
    rssBytesPerLock: (process.memoryUsage().rss - rss0) / count,
    roundTripsPerLock,
  };
}

/** Time spent renewing, from the public stats: count × mean covers every renewal statement ever sent. */
function renewingTotal(ctx: WorkerContext<unknown>): { total: number; count: number; renewed: number; failures: number } {
  const s = ctx.locks.stats();
  return { total: s.renewal.count * s.renewal.meanMs, count: s.renewal.count, renewed: s.renewedLocks, failures: s.renewalFailures };
}

/** Holds what it has for `windowMs` and reports the renewals sent meanwhile. */
export async function renewalWindow(ctx: WorkerContext<{ windowMs: number }>): Promise<RenewalWindow> {
  const a = renewingTotal(ctx);
  const s0 = statementMs;
  const t0 = hostNow();
  await new Promise((r) => setTimeout(r, ctx.args.windowMs));
  const b = renewingTotal(ctx);
  return {
    windowMs: hostNow() - t0,
    renewals: b.count - a.count,
    renewedLocks: b.renewed - a.renewed,
    failures: b.failures - a.failures,
    renewingMs: b.total - a.total,
    statementMs: statementMs - s0,
  };
}

export async function releaseMany(ctx: WorkerContext<{ concurrency: number }>): Promise<ReleasedMany> {
  const held = ctx.locks.stats().held;
  const lost = handles.filter((h) => h.signal.aborted).length;
  const t0 = hostNow();
  let next = 0;
  const all = handles.filter((h) => !h.signal.aborted);
  await Promise.all(
    Array.from({ length: ctx.args.concurrency }, async () => {
      while (next < all.length) await all[next++]!.release();
    }),
  );
  handles = [];
  return { held, lost, releaseMs: hostNow() - t0 };
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
