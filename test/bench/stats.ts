/** Small statistics helpers: every figure is a median over rounds with its min-max spread. */

export function percentile(values: readonly number[], q: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  // Nearest-rank: the smallest value with at least q of the samples at or below it.
  const rank = Math.max(1, Math.ceil(q * sorted.length));
  return sorted[rank - 1]!;
}

export function median(values: readonly number[]): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** One figure: the median of per-round values and their spread. */
export interface Figure {
  readonly median: number;
  readonly min: number;
  readonly max: number;
  readonly rounds: number;
}

export function figure(perRound: readonly number[]): Figure {
  const finite = perRound.filter((v) => Number.isFinite(v));
  return {
    median: median(finite),
    min: finite.length ? Math.min(...finite) : NaN,
    max: finite.length ? Math.max(...finite) : NaN,
    rounds: finite.length,
  };
}

/** Figure scaled by a constant (unit changes). */
export function scale(f: Figure, by: number): Figure {
  return { median: f.median * by, min: f.min * by, max: f.max * by, rounds: f.rounds };
}

/** Ratio of two figures' medians (the spread of a ratio is not reported). */
export function ratio(a: Figure, b: Figure): number {
  return a.median / b.median;
}

export function fmt(value: number, digits = 2): string {
  if (!Number.isFinite(value)) return 'n/a';
  if (Math.abs(value) >= 1000) return Math.round(value).toLocaleString('en-US');
  if (Math.abs(value) >= 100) return value.toFixed(0);
  if (Math.abs(value) >= 10) return value.toFixed(1);
  return value.toFixed(digits);
}

export function fmtFigure(f: Figure, digits = 2): string {
  return `${fmt(f.median, digits)} (${fmt(f.min, digits)}–${fmt(f.max, digits)})`;
}

export function fmtRatio(value: number): string {
  return Number.isFinite(value) ? `${value.toFixed(2)}×` : 'n/a';
}

/** Monotonic time in ms, shared by every process on the host (CLOCK_MONOTONIC). */
export function hostNow(): number {
  return Number(process.hrtime.bigint()) / 1e6;
}
