import { setTimeout as sleep } from 'node:timers/promises';
import type mysql from 'mysql2/promise';
import { checkKey, type KeyVerdict } from './checks.js';
import type { GaleraBed } from './galera.js';
import { COUNTER_TABLE, wall } from './sections.js';
import type { ClusterWorker } from './worker-handle.js';
import type { LoopReport, LoopSpec } from './types.js';

export interface PhaseResult {
  readonly name: string;
  readonly startedAt: number;
  readonly endedAt: number;
  readonly reports: LoopReport[];
  readonly verdicts: KeyVerdict[];
  /** Marks set by the phase's driver (wall clock ms): kill, restarted, synced... */
  readonly marks: Record<string, number>;
}

/** The guarded workload: every kind of section on its own key, and all of them on one shared key. */
export function guardedLoops(phase: string, rowLock: boolean, gapMs = 3): LoopSpec[] {
  const loops: LoopSpec[] = [
    { kind: 'withLock', key: `${phase}:withLock`, callers: 1, lease: 'long', gapMs },
    { kind: 'fenced', key: `${phase}:fenced`, callers: 1, lease: 'long', gapMs },
    { kind: 'mixed', key: `${phase}:mixed`, callers: 1, lease: 'long', gapMs },
  ];
  if (rowLock) loops.push({ kind: 'rowLock', key: `${phase}:rowLock`, callers: 1, lease: 'long', gapMs });
  return loops;
}

/**
 * A holder of a long lease whose hold spans the kill (each hold lasts 80 % of the lease, so one
 * is always in progress, carried by renewals): whether it keeps its lock through the freeze
 * measures the README's minimum lease (a figure, not a pass/fail check: keeping a lock is
 * liveness; never sharing it is what the checks hold the library to).
 */
export function longHoldLoops(phase: string, leaseMs: number): LoopSpec[] {
  return [{ kind: 'hold', key: `${phase}:long-hold`, callers: 1, lease: 'long', gapMs: Math.round(leaseMs * 0.8) }];
}

/**
 * Leases shorter than the freeze a node death causes. The slow keys' sections outlast their lease
 * (renewals keep them) and so span the kill: holders caught by the freeze must lose their locks
 * (signal aborted, fenced commit refused), never share them. The fast key races commits and
 * takeovers held back by the freeze.
 */
export function shortLeaseLoops(phase: string, rowLock: boolean): LoopSpec[] {
  const loops: LoopSpec[] = [
    { kind: 'fenced', key: `${phase}:short-fenced`, callers: 1, lease: 'short', gapMs: 2_500 },
    { kind: 'fenced', key: `${phase}:short-fenced-fast`, callers: 1, lease: 'short', gapMs: 20 },
    { kind: 'hold', key: `${phase}:short-hold`, callers: 1, lease: 'short', gapMs: 2_500 },
    { kind: 'heartbeat', key: `${phase}:heartbeat`, callers: 1, lease: 'short', gapMs: 0 },
  ];
  if (rowLock) loops.push({ kind: 'rowLock', key: `${phase}:short-rowLock`, callers: 1, lease: 'short', gapMs: 2_500 });
  return loops;
}

/**
 * Runs `loops` on every worker while `drive` does its part (waits, kills a node...), then stops
 * the loops, collects the reports and checks every key from the database.
 */
export async function runPhase(
  name: string,
  workers: readonly ClusterWorker[],
  loops: LoopSpec[],
  conn: mysql.Connection,
  drive: (marks: Record<string, number>) => Promise<void>,
  options: { tokens?: boolean } = {},
): Promise<PhaseResult> {
  const keys = [...new Set(loops.filter((l) => l.kind !== 'heartbeat').map((l) => l.key))];
  await conn.query(`INSERT IGNORE INTO ${COUNTER_TABLE} (k, value) VALUES ${keys.map(() => '(?, 0)').join(', ')}`, keys);
  const marks: Record<string, number> = {};
  const startedAt = wall();
  const running = workers.map((w) => w.run(loops, name));
  try {
    await drive(marks);
  } finally {
    for (const w of workers) w.stop();
  }
  const reports = await Promise.all(running);
  const endedAt = wall();
  const beliefs = reports.flatMap((r) => r.beliefs);
  const verdicts: KeyVerdict[] = [];
  for (const key of keys) verdicts.push(await checkKey(conn, key, beliefs, options.tokens !== false));
  return { name, startedAt, endedAt, reports, verdicts, marks };
}

/**
 * The node-death drill: a baseline, kill -9 of `victim`, its restart a little later (recovered
 * position, rejoin by IST or SST) and a stretch after it is synced again, so its workers are seen
 * coming back.
 */
export function nodeKillDrive(bed: GaleraBed, victim: number, log: (line: string) => void) {
  return async (marks: Record<string, number>): Promise<void> => {
    await sleep(6_000);
    marks.kill = wall();
    const pid = await bed.killNode(victim);
    log(`node ${victim} (pid ${pid}) killed with SIGKILL`);
    await sleep(3_000);
    marks.restart = wall();
    const rejoin = await bed.startNode(victim);
    marks.synced = wall();
    log(`node ${victim} restarted and synced in ${(rejoin.ms / 1000).toFixed(1)} s (${rejoin.transfer})`);
    await sleep(10_000);
  };
}
