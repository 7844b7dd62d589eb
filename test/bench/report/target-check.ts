/** One target's check (its verdict from this run's figures), and the helpers every section's checks share. */
import { type Figure, fmt, fmtRatio } from '../stats.js';

export type Verdict = 'met' | 'missed' | 'not measured' | 'reported';

export interface TargetCheck {
  group: 'Lease' | 'Row-lock' | 'PostgreSQL' | 'Kept from before';
  target: string;
  measured: string;
  verdict: Verdict;
}

/** Row-lock waiters park in the server: "≈ 0" waiter statements is read as at most this share of the useful ones. */
export const ROW_LOCK_WAITER_LIMIT = 0.02;

export const notRun = (group: TargetCheck['group'], target: string, section: string): TargetCheck => ({
  group,
  target,
  measured: `${section} section not run`,
  verdict: 'not measured',
});
export const met = (ok: boolean): Verdict => (ok ? 'met' : 'missed');

/** `a / b` against `limit` (`atMost`: a/b ≤ limit, else a/b ≥ limit), with both values and their unit. */
export function ratioCheck(
  group: TargetCheck['group'],
  target: string,
  a: Figure | undefined,
  b: Figure | undefined,
  limit: number,
  atMost: boolean,
  unit: string,
  extra = '',
): TargetCheck {
  if (!a || !b) return notRun(group, target, 'its');
  const ratio = a.median / b.median;
  return {
    group,
    target,
    measured: `${fmtRatio(ratio)} (${fmt(a.median)} vs ${fmt(b.median)} ${unit})${extra}`,
    verdict: met(atMost ? ratio <= limit : ratio >= limit),
  };
}
