import type { LockStrategyName } from '../../lib/index.js';

/**
 * The strategies every guarantee suite runs under: a guarantee the README states holds for both
 * unless it says otherwise. DB_LOCK_TEST_STRATEGIES=row-lock (comma-separated) narrows a run
 * while working on one of them.
 */
export const STRATEGIES: readonly LockStrategyName[] = (process.env.DB_LOCK_TEST_STRATEGIES ?? 'lease,row-lock')
  .split(',')
  .map((s) => s.trim())
  .filter((s): s is LockStrategyName => s === 'lease' || s === 'row-lock');

/** Registers one copy of a suite per strategy (its describe names should include the strategy). */
export function forEachStrategy(suite: (strategy: LockStrategyName) => void): void {
  for (const strategy of STRATEGIES) suite(strategy);
}
