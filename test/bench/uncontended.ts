/**
 * Uncontended section: one caller, one key, sequential operations, in the bench's own process.
 * Items are interleaved in blocks of a few ops; a round's value is the median latency of each item's ops.
 */
import type { BenchConfig } from './config.js';
import { type Figure, figure, hostNow, median } from './stats.js';
import type { UncontendedItem } from './uncontended-items.js';
import { seededRandom, shuffled } from '../support/shuffle.js';

export interface UncontendedFigure {
  readonly item: UncontendedItem;
  /** Latency per op, ms. */
  readonly latency: Figure;
  /** Library items: round trips per op (library pool and DataSource). */
  readonly measuredRoundTrips?: number;
  /** Items whose op reports its first phase (the grant): that phase's latency, ms. */
  readonly firstPhase?: Figure;
}

export type UncontendedResult = Map<string, UncontendedFigure>;

/** Sequential ops of one item before the next item's block (see runUncontended). */
const BLOCK_OPS = 10;

interface RoundOut {
  median: number;
  roundTrips: number;
  phase: number;
}

/**
 * Runs every item's rounds, its ops interleaved with the other items' in short blocks.
 * @param roundTrips the library's round trips so far (its pool and the DataSource), for the measured column.
 */
export async function runUncontended(
  items: readonly UncontendedItem[],
  roundTrips: () => number,
  config: BenchConfig,
  log: (line: string) => void,
): Promise<UncontendedResult> {
  const latencies = new Map<string, number[]>(items.map((i) => [i.id, []]));
  const trips = new Map<string, number[]>(items.map((i) => [i.id, []]));
  const phases = new Map<string, number[]>(items.map((i) => [i.id, []]));
  const record = (item: UncontendedItem, out: RoundOut): void => {
    latencies.get(item.id)!.push(out.median);
    trips.get(item.id)!.push(out.roundTrips);
    phases.get(item.id)!.push(out.phase);
  };
  // The host's load comes in bursts of seconds: a burst that fell on one item's whole round moved
  // its ratio by half. A round therefore runs every item in blocks of BLOCK_OPS sequential ops,
  // the blocks interleaved across the items, so every item and its floor see the same bursts
  // while each op still follows one of its own item (warm, as in a loop of locked calls).
  // The blocks' order is shuffled at every pass: the first ops of a block run on a CPU the block
  // before left, and in a fixed order each item always followed the same one. An item that
  // followed code like its own (a floor after another floor through the same driver calls, the
  // library after the library) then read up to 0.3× faster than after unlike code.
  const interleaved = items.filter((item) => !item.wrapRound);
  const random = seededRandom(0x5eed);
  const indices = interleaved.map((_, n) => n);
  type Samples = { latency: number[]; phase: number[]; trips: number };
  const newSamples = (): Samples => ({ latency: [], phase: [], trips: 0 });
  /** Runs `count` sequential ops of `item`, adding what they measured to `into`. */
  const timeOps = async (item: UncontendedItem, count: number, into: Samples): Promise<void> => {
    for (let i = 0; i < count; i++) {
      const before = roundTrips();
      const t0 = hostNow();
      const phase = await item.op();
      into.latency.push(hostNow() - t0);
      into.trips += roundTrips() - before;
      if (typeof phase === 'number') into.phase.push(phase);
    }
  };
  const roundOut = (samples: Samples, ops: number): RoundOut => ({
    median: median(samples.latency),
    roundTrips: samples.trips / ops,
    phase: median(samples.phase),
  });
  const runRound = async (ops: number): Promise<Map<UncontendedItem, RoundOut>> => {
    const samples = interleaved.map(newSamples);
    for (let done = 0; done < ops; done += BLOCK_OPS)
      for (const n of shuffled(indices, random)) await timeOps(interleaved[n]!, Math.min(BLOCK_OPS, ops - done), samples[n]!);
    return new Map(interleaved.map((item, n) => [item, roundOut(samples[n]!, ops)]));
  };
  /** An item that runs a whole round inside some context (the reentrant one inside withLock) runs its round as a block. */
  const runWrapped = (item: UncontendedItem, ops: number): Promise<RoundOut> =>
    item.wrapRound!(async () => {
      const samples = newSamples();
      await timeOps(item, ops, samples);
      return roundOut(samples, ops);
    });
  // Warm-up, not recorded: connections opened, key rows created, and every item's code optimized
  // by the JIT (rounds until every item has run BENCH_WARMUP_OPS ops and BENCH_WARMUP_MS has passed).
  const warmUntil = performance.now() + config.warmupMs;
  let warmOps = 0;
  do {
    await runRound(config.opsPerRound);
    for (const item of items) if (item.wrapRound) await runWrapped(item, config.opsPerRound);
    warmOps += config.opsPerRound;
  } while (performance.now() < warmUntil || warmOps < config.warmupOps);
  for (let r = 0; r < config.rounds; r++) {
    for (const [item, out] of await runRound(config.opsPerRound)) record(item, out);
    for (const item of items) if (item.wrapRound) record(item, await runWrapped(item, config.opsPerRound));
    log(`  uncontended round ${r + 1}/${config.rounds} done`);
  }
  const figures: UncontendedResult = new Map();
  for (const item of items) {
    figures.set(item.id, {
      item,
      latency: figure(latencies.get(item.id)!),
      measuredRoundTrips: item.countsRoundTrips ? median(trips.get(item.id)!) : undefined,
      firstPhase: phases.get(item.id)!.some(Number.isFinite) ? figure(phases.get(item.id)!) : undefined,
    });
  }
  return figures;
}
