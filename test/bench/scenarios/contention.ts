/**
 * Worker side of the contention section: each worker process runs `callers` concurrent callers
 * looping take the lock → racy counter increment → let go, on one key, for one design, between
 * two host-monotonic instants every process shares.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { DataSource } from 'typeorm';
import type { WorkerContext } from '../../support/lock-worker.js';
import type { HoldEvent } from '../contention-analysis.js';
import { designDeps } from '../designs/deps.js';
import { type Body, createDesign, type DesignDeps, type DesignId, type LockDesign } from '../designs/index.js';
import { hostNow } from '../stats.js';

export interface RoundArgs {
  design: DesignId;
  key: string;
  counterId: number;
  callers: number;
  startAt: number;
  deadline: number;
  pauseMs: number;
  record: boolean;
}

export interface RoundResult {
  events: HoldEvent[];
  increments: number;
  roundTrips: number;
  redisCommands: number;
  gaveUp: number;
}

/** What the parent needs to know of each design (declared by the design itself). */
export interface DesignFacts {
  usefulStatements: number;
  usefulRedisCommands: number;
  handoffRoundTrips: number;
}

let deps: DesignDeps | undefined;
const designs = new Map<DesignId, LockDesign>();

/** The racy critical section: read, then write the value read plus one. Two holders at once lose an update. */
function increment(counterId: number): Body {
  return async (query) => {
    const rows = await query('SELECT v FROM bench_counter WHERE id = ?', [counterId]);
    await query('UPDATE bench_counter SET v = ? WHERE id = ?', [Number(rows[0]!.v) + 1, counterId]);
  };
}

/** Builds the designs and creates what their keys need. */
export async function contentionSetup(
  ctx: WorkerContext<{ designs: DesignId[]; redisUrl: string; keyOf: Record<string, string> }>,
): Promise<Record<string, DesignFacts>> {
  deps ??= designDeps(ctx.locks, ctx.app.get(DataSource), ctx.settings, ctx.args.redisUrl);
  const facts: Record<string, DesignFacts> = {};
  for (const id of ctx.args.designs) {
    let design = designs.get(id);
    if (!design) {
      design = await createDesign(id, deps);
      designs.set(id, design);
    }
    await design.prepare(ctx.args.keyOf[id]!);
    facts[id] = {
      usefulStatements: design.usefulStatements,
      usefulRedisCommands: design.usefulRedisCommands,
      handoffRoundTrips: design.handoffRoundTrips,
    };
  }
  return facts;
}

/** `holds` sequential uncontended holds: the client round trips one hold costs when nobody waits. */
export async function contentionCalibrate(ctx: WorkerContext<{ design: DesignId; key: string; counterId: number; holds: number }>): Promise<number> {
  const design = designs.get(ctx.args.design)!;
  const before = design.roundTrips();
  for (let i = 0; i < ctx.args.holds; i++) await design.hold(ctx.args.key, 0, increment(ctx.args.counterId));
  return (design.roundTrips() - before) / ctx.args.holds;
}

/** Runs one round; returns every hold (if `record`) and the design's counters over the round. */
export async function contentionRound(ctx: WorkerContext<RoundArgs>): Promise<RoundResult> {
  const args = ctx.args;
  const design = designs.get(args.design)!;
  const sent0 = design.roundTrips();
  const redis0 = design.redisCommands();
  const gaveUp0 = design.gaveUp;
  const events: HoldEvent[] = [];
  const body = increment(args.counterId);
  let increments = 0;

  const caller = async (index: number): Promise<void> => {
    const name = `${process.pid}:${index}`;
    while (hostNow() < args.deadline) {
      const acqStart = hostNow();
      const { acquiredAt, releasingAt } = await design.hold(args.key, index, body);
      const relEnd = hostNow();
      // Counted once the hold is over: with the transactional designs the increment exists only after COMMIT.
      increments++;
      if (args.record) events.push([name, acqStart, acquiredAt, releasingAt, relEnd]);
      if (args.pauseMs > 0) await sleep(args.pauseMs);
    }
  };

  const wait = args.startAt - hostNow();
  if (wait > 0) await sleep(wait);
  await Promise.all(Array.from({ length: args.callers }, (_, i) => caller(i)));
  return {
    events,
    increments,
    roundTrips: design.roundTrips() - sent0,
    redisCommands: design.redisCommands() - redis0,
    gaveUp: design.gaveUp - gaveUp0,
  };
}

/** Closes what the rounds opened (the app itself is closed by the worker host). */
export async function contentionClose(): Promise<void> {
  for (const design of designs.values()) await design.close();
  designs.clear();
  await deps?.slots.close();
  deps = undefined;
}
