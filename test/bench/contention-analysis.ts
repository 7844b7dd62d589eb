/**
 * From the holds recorded in one contention round to its figures: throughput, waits, handoffs,
 * barging. Pure functions of the events, so they can be checked by hand.
 */
import { percentile } from './stats.js';

/** One hold: [caller, acquire started, acquired, release started, released] (host-monotonic ms). */
export type HoldEvent = [caller: string, acqStart: number, acqEnd: number, relStart: number, relEnd: number];

export interface HoldFigures {
  throughput: number;
  waitP50: number;
  waitP99: number;
  handoffP50: number;
  handoffP99: number;
  /** Median time a holder held (acquired → began to let go), ms: the critical section as the caller ran it. */
  holdP50: number;
  /** Share of consecutive holds by the same caller. */
  barging: number;
  /** Share of consecutive holds by callers of the same process (the same caller included). */
  sameProcess: number;
  ops: number;
}

export function analyseHolds(events: readonly HoldEvent[], startAt: number, deadline: number): HoldFigures {
  const inWindow = events.filter((e) => e[2] >= startAt && e[2] <= deadline).sort((a, b) => a[2] - b[2]);
  // Waits of every acquisition started before the deadline, censored there: a caller still waiting
  // when the window closes (starved) counts with what it waited so far rather than vanishing.
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
    // A handoff to a caller that was already waiting when the holder began to let go.
    if (next[1] <= prev[3]) handoffs.push(next[2] - prev[3]);
  }
  return {
    throughput: inWindow.length / ((deadline - startAt) / 1000),
    waitP50: percentile(waits, 0.5),
    waitP99: percentile(waits, 0.99),
    handoffP50: percentile(handoffs, 0.5),
    handoffP99: percentile(handoffs, 0.99),
    holdP50: percentile(
      inWindow.map((e) => e[3] - e[2]),
      0.5,
    ),
    barging: pairs ? same / pairs : NaN,
    sameProcess: pairs ? sameProcess / pairs : NaN,
    ops: inWindow.length,
  };
}
