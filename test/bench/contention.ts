/**
 * Contention section: P processes × C callers on one key, a racy counter as critical section,
 * every design in turn, rounds interleaved. Per round: throughput, waits, handoffs, barging,
 * statements spent by waiters (server counter and client count), lost updates.
 */
import type { Redis } from 'ioredis';
import type mysql from 'mysql2/promise';
import type { LockWorker } from '../support/worker-host.js';
import type { BenchConfig } from './config.js';
import { analyseHolds, type HoldFigures } from './contention-analysis.js';
import type { DesignId } from './designs/index.js';
import type { DesignFacts, RoundArgs, RoundResult } from './scenarios/contention.js';
import { type Figure, figure, hostNow } from './stats.js';

const SCENARIO = new URL('./scenarios/contention.js', import.meta.url).href;
const COUNTER_ID = 1;
const CALIBRATION_COUNTER_ID = 2;
const CALIBRATION_HOLDS = 30;

export interface RoundMetrics extends HoldFigures {
  lost: number;
  /** Server: SHOW GLOBAL STATUS 'Questions' delta minus the useful statements of the holds, per second. */
  waiterQps: number;
  waiterShare: number;
  /** Client: round trips the designs sent beyond the useful ones, per second. */
  clientWaiterRtps: number;
  clientWaiterShare: number;
  redisWaiterCps: number;
  gaveUp: number;
}

export type ContentionFigures = { [K in keyof RoundMetrics]: Figure } & { lostTotal: number; gaveUpTotal: number };

/** Per design: what one hold costs when nobody waits, and what it declares. */
export interface Calibration extends DesignFacts {
  /** Client round trips per uncontended hold (exact: no background in a client count). */
  roundTripsPerHold: number;
  /** Server statements per uncontended hold ('Questions' delta; includes other clients of the server). */
  measuredStatementsPerHold: number;
}

export interface ContentionVariant {
  pauseMs: number;
  byDesign: Map<DesignId, ContentionFigures>;
  /** Serial critical section, no lock, one caller: what one caller alone could do (ops/s). */
  serialFloor: Figure;
  /** Statements/s the server counted while the bench sent nothing, just before the variant. */
  backgroundQps: number;
}

export interface ContentionResult {
  designs: readonly DesignId[];
  calibration: Map<DesignId, Calibration>;
  variants: ContentionVariant[];
  /** Background statements/s after the section. */
  backgroundAfterQps: number;
}

export interface ContentionSetup {
  workers: LockWorker[];
  admin: mysql.Connection;
  redis: Redis;
  redisUrl: string;
  log: (line: string) => void;
}

export const keyOf = (design: DesignId): string => `bench:contended:${design}`;

export async function globalQuestions(admin: mysql.Connection): Promise<number> {
  const [rows] = await admin.query("SHOW GLOBAL STATUS LIKE 'Questions'");
  return Number((rows as { Value: string }[])[0]!.Value);
}

async function redisCommands(redis: Redis): Promise<number> {
  const match = /total_commands_processed:(\d+)/.exec(await redis.info('stats'));
  return match ? Number(match[1]) : NaN;
}

/** Statements/s of the server while the bench sends nothing (other clients of the server). */
export async function backgroundQps(admin: mysql.Connection, ms: number): Promise<number> {
  const before = await globalQuestions(admin);
  const t0 = hostNow();
  await new Promise((r) => setTimeout(r, ms));
  const after = await globalQuestions(admin);
  return Math.max(0, after - before - 1) / ((hostNow() - t0) / 1000);
}

/** The critical section run serially by one caller without a lock (SELECT + UPDATE): the ceiling, ops/s. */
async function serialFloorRound(admin: mysql.Connection, ops: number): Promise<number> {
  const t0 = hostNow();
  for (let i = 0; i < ops; i++) {
    const [rows] = await admin.query('SELECT v FROM bench_counter WHERE id = 4');
    await admin.query('UPDATE bench_counter SET v = ? WHERE id = 4', [Number((rows as { v: unknown }[])[0]!.v) + 1]);
  }
  return ops / ((hostNow() - t0) / 1000);
}

async function calibrate(
  setup: ContentionSetup,
  designs: readonly DesignId[],
  facts: Record<string, DesignFacts>,
): Promise<Map<DesignId, Calibration>> {
  const calibration = new Map<DesignId, Calibration>();
  const worker = setup.workers[0]!;
  for (const design of designs) {
    const args = { design, key: keyOf(design), counterId: CALIBRATION_COUNTER_ID, holds: 5 };
    await worker.run(SCENARIO, 'contentionCalibrate', args); // warm-up
    const q0 = await globalQuestions(setup.admin);
    const roundTripsPerHold = await worker.run<number>(SCENARIO, 'contentionCalibrate', { ...args, holds: CALIBRATION_HOLDS });
    const q1 = await globalQuestions(setup.admin);
    calibration.set(design, { ...facts[design]!, roundTripsPerHold, measuredStatementsPerHold: (q1 - q0 - 1) / CALIBRATION_HOLDS });
  }
  return calibration;
}

/** The library's designs: long call paths that V8 optimizes only after a few thousand calls (see BenchConfig.warmupOps). */
const LIBRARY_DESIGNS: ReadonlySet<DesignId> = new Set(['lease', 'lease-decorated', 'row-lock']);

/**
 * Before any variant, every worker runs warmupOps holds of each library design on its key, one
 * caller each (contended across workers: the waiting path runs too). The time-based warm-up alone
 * gave a process a few hundred holds, of code still being optimized; the other designs' few
 * driver calls are optimized within it.
 */
async function warmLibraryDesigns(setup: ContentionSetup, config: BenchConfig, designs: readonly DesignId[]): Promise<void> {
  for (const design of designs.filter((d) => LIBRARY_DESIGNS.has(d))) {
    const t0 = hostNow();
    const args = { design, key: keyOf(design), counterId: CALIBRATION_COUNTER_ID, holds: config.warmupOps };
    await Promise.all(setup.workers.map((w) => w.run(SCENARIO, 'contentionCalibrate', args)));
    setup.log(`  warm-up ${design}: ${config.warmupOps} holds per process in ${((hostNow() - t0) / 1000).toFixed(1)} s`);
  }
}

async function runRound(
  setup: ContentionSetup,
  config: BenchConfig,
  design: DesignId,
  calibration: Calibration,
  pauseMs: number,
  windowMs: number,
  record: boolean,
): Promise<RoundMetrics> {
  const { workers, admin, redis } = setup;
  await admin.query('UPDATE bench_counter SET v = 0 WHERE id = ?', [COUNTER_ID]);
  const q0 = await globalQuestions(admin);
  const r0 = await redisCommands(redis);
  const startAt = hostNow() + 150;
  const deadline = startAt + windowMs;
  const args: RoundArgs = {
    design,
    key: keyOf(design),
    counterId: COUNTER_ID,
    callers: config.callersPerProcess,
    startAt,
    deadline,
    pauseMs,
    record,
  };
  const results = await Promise.all(workers.map((w) => w.run<RoundResult>(SCENARIO, 'contentionRound', args)));
  const endedAt = hostNow();
  const q1 = await globalQuestions(admin);
  const r1 = await redisCommands(redis);
  const [rows] = await admin.query('SELECT v FROM bench_counter WHERE id = ?', [COUNTER_ID]);
  const counter = Number((rows as { v: unknown }[])[0]!.v);

  const holds = results.reduce((s, r) => s + r.increments, 0);
  const sent = results.reduce((s, r) => s + r.roundTrips, 0);
  const seconds = (endedAt - startAt) / 1000;
  // Server: everything counted in the window beyond the holds' own statements was spent waiting
  // (or by other clients of the server: see the background rate). The one probe inside is q1's SHOW.
  const useful = holds * calibration.usefulStatements;
  const waiterStatements = Math.max(0, q1 - q0 - useful - 1);
  // Client: round trips beyond what an uncontended hold costs, plus the handoff's own round trips.
  const usefulTrips = holds * (calibration.roundTripsPerHold + calibration.handoffRoundTrips);
  const waiterTrips = Math.max(0, sent - usefulTrips);
  const usefulRedis = holds * calibration.usefulRedisCommands;
  const figures = analyseHolds(record ? results.flatMap((r) => r.events) : [], startAt, deadline);
  return {
    ...figures,
    lost: holds - counter,
    waiterQps: waiterStatements / seconds,
    waiterShare: useful > 0 ? waiterStatements / useful : NaN,
    clientWaiterRtps: waiterTrips / seconds,
    clientWaiterShare: usefulTrips > 0 ? waiterTrips / usefulTrips : NaN,
    redisWaiterCps: Math.max(0, r1 - r0 - usefulRedis - 1) / seconds,
    gaveUp: results.reduce((s, r) => s + r.gaveUp, 0),
  };
}

function summarise(rounds: RoundMetrics[]): ContentionFigures {
  const keys = Object.keys(rounds[0]!) as (keyof RoundMetrics)[];
  const out = Object.fromEntries(keys.map((k) => [k, figure(rounds.map((r) => r[k]))])) as { [K in keyof RoundMetrics]: Figure };
  return { ...out, lostTotal: rounds.reduce((s, r) => s + r.lost, 0), gaveUpTotal: rounds.reduce((s, r) => s + r.gaveUp, 0) };
}

async function runVariant(
  setup: ContentionSetup,
  config: BenchConfig,
  designs: readonly DesignId[],
  calibration: Map<DesignId, Calibration>,
  pauseMs: number,
): Promise<ContentionVariant> {
  const background = await backgroundQps(setup.admin, 1000);
  // Warm-up, not recorded: connections, doorbells and scripts loaded, and the code of every design
  // past the JIT's first tiers (a lease hold runs a few hundred functions; in the first second of a
  // 400 ms warm-up they still ran unoptimized, and its throughput rose round by round after it).
  for (const design of designs) await runRound(setup, config, design, calibration.get(design)!, pauseMs, config.warmupMs, false);
  const perRound = new Map<DesignId, RoundMetrics[]>(designs.map((d) => [d, []]));
  const serial: number[] = [];
  for (let round = 0; round < config.rounds; round++) {
    serial.push(await serialFloorRound(setup.admin, Math.max(50, config.opsPerRound)));
    for (const design of designs) {
      const m = await runRound(setup, config, design, calibration.get(design)!, pauseMs, config.contentionWindowMs, true);
      perRound.get(design)!.push(m);
      setup.log(
        `  pause=${pauseMs}ms round ${round + 1}/${config.rounds} ${design}: ${m.throughput.toFixed(0)} ops/s, wait p99 ${m.waitP99.toFixed(1)} ms, ` +
          `same process ${(m.sameProcess * 100).toFixed(0)}%, handoff p50 ${m.handoffP50.toFixed(2)} ms, hold p50 ${m.holdP50.toFixed(2)} ms, waiter ${(m.waiterShare * 100).toFixed(0)}% (client ${(m.clientWaiterShare * 100).toFixed(0)}%), lost ${m.lost}`,
      );
    }
  }
  const byDesign = new Map<DesignId, ContentionFigures>([...perRound].map(([d, rounds]) => [d, summarise(rounds)]));
  return { pauseMs, byDesign, serialFloor: figure(serial), backgroundQps: background };
}

/** The variants (by default: callers re-request at once; callers pause 2 ms), after a calibration of every design. */
export async function runContention(
  setup: ContentionSetup,
  config: BenchConfig,
  designs: readonly DesignId[],
  pauses: readonly number[] = [0, 2],
): Promise<ContentionResult> {
  const keys = Object.fromEntries(designs.map((d) => [d, keyOf(d)]));
  const facts = (
    await Promise.all(
      setup.workers.map((w) => w.run<Record<string, DesignFacts>>(SCENARIO, 'contentionSetup', { designs, redisUrl: setup.redisUrl, keyOf: keys })),
    )
  )[0]!;
  const calibration = await calibrate(setup, designs, facts);
  await warmLibraryDesigns(setup, config, designs);
  for (const [d, c] of calibration)
    setup.log(
      `  calibration ${d}: ${c.roundTripsPerHold.toFixed(2)} round trips per hold; statements per hold ${c.measuredStatementsPerHold.toFixed(2)} measured, ${c.usefulStatements} declared`,
    );
  const variants: ContentionVariant[] = [];
  for (const pauseMs of pauses) variants.push(await runVariant(setup, config, designs, calibration, pauseMs));
  return { designs, calibration, variants, backgroundAfterQps: await backgroundQps(setup.admin, 1000) };
}

/** Closes what the workers opened for the section. */
export async function closeContention(workers: readonly LockWorker[]): Promise<void> {
  await Promise.all(workers.map((w) => w.run(SCENARIO, 'contentionClose')));
}
