/**
 * Child-process side of the contention section: each worker process runs `callers` concurrent
 * callers looping acquire → racy counter increment → release on one key, for one design, between
 * two host-monotonic instants that every process shares.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import mysql from 'mysql2/promise';
import type { WorkerContext } from '../../support/lock-worker.js';
import {
  type DesignId,
  forUpdateDesign,
  getLockDesign,
  leaseDesign,
  type LockDesign,
  naiveTableDesign,
  redlockDesign,
} from '../designs.js';
import { hostNow } from '../stats.js';

/** One hold: [caller, acquire started, acquired, release started, released] (host ms). */
export type HoldEvent = [caller: string, acqStart: number, acqEnd: number, relStart: number, relEnd: number];

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
  sentStatements: number;
  sentRedisCommands: number;
  gaveUp: number;
}

let designs: Map<DesignId, LockDesign> | undefined;
let business: mysql.Pool | undefined;

async function designFor(ctx: WorkerContext<unknown>, id: DesignId, redisUrl: string): Promise<LockDesign> {
  designs ??= new Map();
  let design = designs.get(id);
  if (design) return design;
  switch (id) {
    case 'lease':
      design = leaseDesign(ctx.locks);
      break;
    case 'for-update':
      design = forUpdateDesign(ctx.settings);
      break;
    case 'get-lock':
      design = getLockDesign(ctx.settings);
      break;
    case 'naive-table':
      design = naiveTableDesign(ctx.settings, `pid:${process.pid}`);
      break;
    case 'redlock':
      design = await redlockDesign(redisUrl);
      break;
  }
  designs.set(id, design);
  return design;
}

/** Runs one round; returns every hold (if `record`) and counters for the design. */
export async function contentionRound(ctx: WorkerContext<RoundArgs & { redisUrl: string }>): Promise<RoundResult> {
  const args = ctx.args;
  const design = await designFor(ctx, args.design, args.redisUrl);
  business ??= mysql.createPool({ ...ctx.settings, connectionLimit: Math.max(2, args.callers) });
  const pool = business;
  const sentBefore = design.sentStatements();
  const redisBefore = design.sentRedisCommands();
  const gaveUpBefore = design.gaveUp;
  const events: HoldEvent[] = [];
  let increments = 0;

  const caller = async (index: number): Promise<void> => {
    const name = `${process.pid}:${index}`;
    while (hostNow() < args.deadline) {
      const acqStart = hostNow();
      const release = await design.acquire(args.key, index);
      const acqEnd = hostNow();
      try {
        // The racy critical section: read, then write the value read plus one. Two holders at
        // once lose an update; the parent compares the counter with the increments.
        const [rows] = await pool.query('SELECT v FROM bench_counter WHERE id = ?', [args.counterId]);
        const value = Number((rows as { v: unknown }[])[0]!.v);
        await pool.query('UPDATE bench_counter SET v = ? WHERE id = ?', [value + 1, args.counterId]);
        increments++;
      } finally {
        const relStart = hostNow();
        await release();
        const relEnd = hostNow();
        if (args.record) events.push([name, acqStart, acqEnd, relStart, relEnd]);
      }
      if (args.pauseMs > 0) await sleep(args.pauseMs);
    }
  };

  const wait = args.startAt - hostNow();
  if (wait > 0) await sleep(wait);
  await Promise.all(Array.from({ length: args.callers }, (_, i) => caller(i)));
  return {
    events,
    increments,
    sentStatements: design.sentStatements() - sentBefore,
    sentRedisCommands: design.sentRedisCommands() - redisBefore,
    gaveUp: design.gaveUp - gaveUpBefore,
  };
}

/** Closes what the rounds opened (the app itself is closed by the worker host). */
export async function contentionClose(): Promise<void> {
  for (const design of designs?.values() ?? []) await design.close();
  designs = undefined;
  await business?.end();
  business = undefined;
}
