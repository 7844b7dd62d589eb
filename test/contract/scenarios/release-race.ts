/**
 * The release-against-renewal race, run inside worker processes. It wraps the lease log's renew
 * and endRows on purpose (to count releases sent while a renewal was on the wire): tests only.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { partsOf } from '../../support/lock-internals.js';
import type { WorkerContext } from '../../support/lock-worker.js';
import type { LockLogStore, ProcessLeaseStore } from '../../../lib/store/lock-store.js';
import { tapStatements } from '../../support/statement-tap.js';

/**
 * Many short holds raced against a fast watchdog (renewIntervalMs tiny): counts releases sent
 * while a renewal statement was on the wire, to show the race was really exercised.
 */
export async function releaseRace(
  ctx: WorkerContext<{ iterations: number; concurrency: number; keys: number; leaseMs: number; maxHoldMs: number }>,
): Promise<{ releases: number; racedReleases: number; renewals: number; lost: number; trace: string[] }> {
  // Every statement on the lock tables, with client times (ms since the scenario began) of its send
  // and answer and what the answer said: a failed overlap check prints those of its two holders.
  const trace: string[] = [];
  const t0 = performance.now();
  tapStatements((sql) => {
    if (!/db_lock/.test(sql)) return;
    const sentAt = (performance.now() - t0).toFixed(3);
    return (error, result) => {
      const said = error ? `error ${String((error as { code?: string }).code ?? error)}` : JSON.stringify(summary(result));
      trace.push(`${sentAt} → ${(performance.now() - t0).toFixed(3)} ${said} ${sql.replace(/\s+/g, ' ').slice(0, 4000)}`);
    };
  });
  // Instrumentation only: count releases sent while a renewal statement was on the wire.
  // The store's lock log (MySQL's or PostgreSQL's: both renew and end rows by these methods).
  const log = partsOf(ctx.locks).store.log as ProcessLeaseStore & LockLogStore;
  let renewing = 0;
  let racedReleases = 0;
  const renew = log.renew.bind(log);
  const endRows = log.endRows.bind(log);
  log.renew = async (...args: Parameters<typeof renew>) => {
    renewing++;
    try {
      return await renew(...args);
    } finally {
      renewing--;
    }
  };
  log.endRows = async (...args: Parameters<typeof endRows>) => {
    if (renewing > 0) racedReleases++;
    return endRows(...args);
  };
  let next = 0;
  let releases = 0;
  const before = ctx.locks.stats();
  const lane = async (): Promise<void> => {
    while (next < ctx.args.iterations) {
      const i = next++;
      const lock = await ctx.locks.acquire(`race:${process.pid}:${i % ctx.args.keys}`, { leaseMs: ctx.args.leaseMs, timeoutMs: 10_000 });
      await sleep(Math.random() * ctx.args.maxHoldMs);
      await lock.release();
      releases++;
    }
  };
  await Promise.all(Array.from({ length: ctx.args.concurrency }, lane));
  const after = ctx.locks.stats();
  return { releases, racedReleases, renewals: after.renewals - before.renewals, lost: after.lost - before.lost, trace };
}

/** What a statement's answer says, short: affected rows and insert id per result, rows as they are (pg: row count and rows). */
function summary(result: unknown): unknown {
  if (Array.isArray(result)) return result.map(summary);
  if (result instanceof pg.Result) return [result.rowCount, result.rows];
  const header = result as { affectedRows?: number; insertId?: number } | null;
  return header && typeof header === 'object' && 'affectedRows' in header ? [header.affectedRows, header.insertId] : result;
}
