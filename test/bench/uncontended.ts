/**
 * Uncontended section: one caller, one key, sequential operations, in the bench's own process.
 * Items are interleaved round by round; a round's value is the median latency of its ops.
 */
import type { BenchConfig } from './config.js';
import { type Figure, figure, hostNow, median } from './stats.js';
import type { UncontendedItem } from './uncontended-items.js';

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

interface RoundOut {
  median: number;
  roundTrips: number;
  phase: number;
}

/**
 * Runs every item's rounds, interleaved (round 1 of all items, then round 2 ...).
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
  const runRound = async (item: UncontendedItem, ops: number): Promise<RoundOut> => {
    const round = async (): Promise<RoundOut> => {
      const samples: number[] = [];
      const phaseSamples: number[] = [];
      const before = roundTrips();
      for (let i = 0; i < ops; i++) {
        const t0 = hostNow();
        const phase = await item.op();
        samples.push(hostNow() - t0);
        if (typeof phase === 'number') phaseSamples.push(phase);
      }
      return { median: median(samples), roundTrips: (roundTrips() - before) / ops, phase: median(phaseSamples) };
    };
    return item.wrapRound ? item.wrapRound(round) : round();
  };
  // Warm-up: connections opened, key rows created, JIT.
  for (const item of items) await runRound(item, Math.min(30, config.opsPerRound));
  for (let r = 0; r < config.rounds; r++) {
    for (const item of items) {
      const result = await runRound(item, config.opsPerRound);
      latencies.get(item.id)!.push(result.median);
      trips.get(item.id)!.push(result.roundTrips);
      phases.get(item.id)!.push(result.phase);
    }
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
