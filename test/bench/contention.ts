/**
 * Contention section: P processes × C callers on one key, a racy counter as critical section,
 * every design in turn, rounds interleaved. Per round: throughput, wait and handoff latencies,
 * barging share, statements spent by waiters (server counters and client count), lost updates.
 */
import type { Redis } from 'ioredis';
import type mysql from 'mysql2/promise';
import type { LockWorker } from '../support/worker-host.js';
import type { BenchConfig } from './config.js';
import { type DesignId, DESIGN_IDS } from './designs.js';
import type { HoldEvent, RoundArgs, RoundResult } from './scenarios/contention.js';
import { type Figure, figure, hostNow, percentile } from './stats.js';

const SCENARIO = new URL('./scenarios/contention.js', import.meta.url).href;

export interface RoundMetrics {
  throughput: number;
  waitP50: number;
  waitP99: number;
  handoffP50: number;
  handoffP99: number;
  barging: number;
  sameProcess: number;
  lost: number;
  waiterQps: number;
  waiterShare: number;
  clientWaiterQps: number;
  clientWaiterShare: number;
  redisWaiterCps: number;
  gaveUp: number;
  ops: number;
}

export type ContentionFigures = { [K in keyof RoundMetrics]: Figure } & { lostTotal: number; gaveUpTotal: number };

export interface ContentionResult {
  pauseMs: number;
  byDesign: Map<DesignId, ContentionFigures>;
  /** Serial critical section, no lock, one caller: the throughput ceiling (ops/s). */
  serialFloor: Figure;
}

export interface ContentionSetup {
  workers: LockWorker[];
  admin: mysql.Connection;
  redis: Redis;
  redisUrl: string;
  usefulStatements: Record<DesignId, number>;
  usefulRedisCommands: Record<DesignId, number>;
  log: (line: string) => void;
}

export async function globalQuestions(admin: mysql.Connection): Promise<number> {
  const [rows] = await admin.query("SHOW GLOBAL STATUS LIKE 'Questions'");
  return Number((rows as { Value: string }[])[0]!.Value);
}

async function redisCommands(redis: Redis): Promise<number> {
  const info = await redis.info('stats');
  const match = /total_commands_processed:(\d+)/.exec(info);
  return match ? Number(match[1]) : NaN;
}

/** Background statement rate of the server while the bench sends nothing (other users of the server). */
export async function backgroundQps(admin: mysql.Connection, ms: number): Promise<number> {
  const before = await globalQuestions(admin);
  const t0 = hostNow();
  await new Promise((r) => setTimeout(r, ms));
  const after = await globalQuestions(admin);
  return (after - before - 1) / ((hostNow() - t0) / 1000);
}

/** Serial critical section (SELECT + UPDATE), no lock: what one caller alone could do per second. */
async function serialFloorRound(admin: mysql.Connection, ops: number): Promise<number> {
  const t0 = hostNow();
  for (let i = 0; i < ops; i++) {
    const [rows] = await admin.query('SELECT v FROM bench_counter WHERE id = 4');
    const value = Number((rows as { v: unknown }[])[0]!.v);
    await admin.query('UPDATE bench_counter SET v = ? WHERE id = 4', [value + 1]);
  }
  return ops / ((hostNow() - t0) / 1000);
}

export function analyseRound(events: HoldEvent[], startAt: number, deadline: number): Omit<RoundMetrics, 'lost' | 'waiterQps' | 'waiterShare' | 'clientWaiterQps' | 'clientWaiterShare' | 'redisWaiterCps' | 'gaveUp'> {
  const inWindow = events.filter((e) => e[2] >= startAt && e[2] <= deadline).sort((a, b) => a[2] - b[2]);
  // Waits of every acquisition started in the window, censored at the deadline: a caller still
  // waiting when the window closes (starved by barging) counts with at least what it waited so
  // far, rather than vanishing from the percentiles.
  const waits = events.filter((e) => e[1] < deadline).map((e) => Math.min(e[2], deadline) - e[1]);
  const handoffs: number[] = [];
  let same = 0;
  let sameProcess = 0;
  let pairs = 0;
  for (let i = 1; i < inWindow.length; i++) {
    const prev = inWindow[i - 1]!;
    const next = inWindow[i]!;
    pairs++;
    if (prev[0].split(':')[0] === next[0].split(':')[0]) sameProcess++;
    if (prev[0] === next[0]) {
      same++;
      continue;
    }
    // A handoff to a caller that was already waiting when the holder began to release.
    if (next[1] <= prev[3]) handoffs.push(next[2] - prev[3]);
  }
  return {
    throughput: inWindow.length / ((deadline - startAt) / 1000),
    waitP50: percentile(waits, 0.5),
    waitP99: percentile(waits, 0.99),
    handoffP50: percentile(handoffs, 0.5),
    handoffP99: percentile(handoffs, 0.99),
    barging: pairs ? same / pairs : NaN,
    sameProcess: pairs ? sameProcess / pairs : NaN,
    ops: inWindow.length,
  };
}

async function runRound(setup: ContentionSetup, config: BenchConfig, design: DesignId, pauseMs: number, windowMs: number, record: boolean): Promise<RoundMetrics> {
  const { workers, admin, redis } = setup;
  const counterId = 1;
  await admin.query('UPDATE bench_counter SET v = 0 WHERE id = ?', [counterId]);
  const q0 = await globalQuestions(admin);
  const r0 = await redisCommands(redis);
  const startAt = hostNow() + 150;
  const deadline = startAt + windowMs;
  const args: RoundArgs & { redisUrl: string } = {
    design,
    key: `bench:contended:${design}`,
    counterId,
    callers: config.callersPerProcess,
    startAt,
    deadline,
    pauseMs,
    record,
    redisUrl: setup.redisUrl,
  };
  const results = await Promise.all(workers.map((w) => w.run<RoundResult>(SCENARIO, 'contentionRound', args)));
  const endedAt = hostNow();
  const q1 = await globalQuestions(admin);
  const r1 = await redisCommands(redis);
  const [rows] = await admin.query('SELECT v FROM bench_counter WHERE id = ?', [counterId]);
  const counter = Number((rows as { v: unknown }[])[0]!.v);

  const increments = results.reduce((s, r) => s + r.increments, 0);
  const sent = results.reduce((s, r) => s + r.sentStatements, 0);
  const gaveUp = results.reduce((s, r) => s + r.gaveUp, 0);
  const seconds = (endedAt - startAt) / 1000;
  // Useful statements: the lock's own statements per successful hold, plus the critical section's
  // two. Everything else the server counted in the window was spent waiting (or by other clients
  // of the server: see the background rate in the report). The one probe inside is q1's SHOW.
  const useful = increments * (setup.usefulStatements[design] + 2);
  const probes = 1;
  const waiterStatements = Math.max(0, q1 - q0 - useful - probes);
  const usefulRedis = increments * setup.usefulRedisCommands[design];
  const metrics = record ? analyseRound(results.flatMap((r) => r.events), startAt, deadline) : analyseRound([], startAt, deadline);
  return {
    ...metrics,
    lost: increments - counter,
    waiterQps: waiterStatements / seconds,
    waiterShare: useful > 0 ? waiterStatements / useful : NaN,
    clientWaiterQps: Math.max(0, sent - increments * setup.usefulStatements[design]) / seconds,
    clientWaiterShare: useful > 0 ? Math.max(0, sent - increments * setup.usefulStatements[design]) / useful : NaN,
    redisWaiterCps: Math.max(0, r1 - r0 - usefulRedis - 1) / seconds,
    gaveUp,
  };
}

export async function runContention(setup: ContentionSetup, config: BenchConfig, pauseMs: number, designs: readonly DesignId[] = DESIGN_IDS): Promise<ContentionResult> {
  // Warm-up (connections, JIT, scripts loaded), not recorded.
  for (const design of designs) await runRound(setup, config, design, pauseMs, 400, false);
  const perRound = new Map<DesignId, RoundMetrics[]>(designs.map((d) => [d, []]));
  const serial: number[] = [];
  for (let round = 0; round < config.rounds; round++) {
    serial.push(await serialFloorRound(setup.admin, Math.max(50, config.opsPerRound)));
    for (const design of designs) {
      const metrics = await runRound(setup, config, design, pauseMs, config.contentionWindowMs, true);
      perRound.get(design)!.push(metrics);
      setup.log(
        `  contention pause=${pauseMs}ms round ${round + 1}/${config.rounds} ${design}: ${metrics.throughput.toFixed(0)} ops/s, ` +
          `wait p99 ${metrics.waitP99.toFixed(1)} ms, barging ${(metrics.barging * 100).toFixed(0)}% (same process ${(metrics.sameProcess * 100).toFixed(0)}%), handoff p50 ${metrics.handoffP50.toFixed(2)} ms, lost ${metrics.lost}`,
      );
    }
  }
  const byDesign = new Map<DesignId, ContentionFigures>();
  for (const [design, rounds] of perRound) {
    const pick = (k: keyof RoundMetrics): Figure => figure(rounds.map((r) => r[k]));
    byDesign.set(design, {
      throughput: pick('throughput'),
      waitP50: pick('waitP50'),
      waitP99: pick('waitP99'),
      handoffP50: pick('handoffP50'),
      handoffP99: pick('handoffP99'),
      barging: pick('barging'),
      sameProcess: pick('sameProcess'),
      lost: pick('lost'),
      waiterQps: pick('waiterQps'),
      waiterShare: pick('waiterShare'),
      clientWaiterQps: pick('clientWaiterQps'),
      clientWaiterShare: pick('clientWaiterShare'),
      redisWaiterCps: pick('redisWaiterCps'),
      gaveUp: pick('gaveUp'),
      ops: pick('ops'),
      lostTotal: rounds.reduce((s, r) => s + r.lost, 0),
      gaveUpTotal: rounds.reduce((s, r) => s + r.gaveUp, 0),
    });
  }
  return { pauseMs, byDesign, serialFloor: figure(serial) };
}

