import type { LockStrategyName } from '../../lib/index.js';
import { isLockStrategyName, LOCK_STRATEGY_NAMES } from '../../lib/strategies/lock-strategy-name.js';

/** What a strategy promises beyond the shared contract; the guarantee registry (contract-targets.ts) selects by these. */
export type StrategyCapability =
  /** A holder that stops renewing loses its lock when its lease runs out, and a waiter takes over (fenced). */
  | 'lease-expiry'
  /** A held lock holds no database connection; renewals go through the process lease. */
  | 'connection-free-holders'
  /** The lock is the holder's open business transaction on its own connection; it ends with that connection. */
  | 'holder-connection';

/**
 * What each strategy of the library's registry promises, as the contract tests see it. Keyed by
 * LockStrategyName: a strategy added to the registry does not compile here until it says.
 */
export const STRATEGY_CAPABILITIES: Readonly<Record<LockStrategyName, readonly StrategyCapability[]>> = {
  lease: ['lease-expiry', 'connection-free-holders'],
  'row-lock': ['holder-connection'],
};

/**
 * The strategies every guarantee suite runs under: a guarantee the README states holds for both
 * unless it says otherwise. DB_LOCK_TEST_STRATEGIES=row-lock (comma-separated) narrows a run
 * while working on one of them.
 */
export const STRATEGIES: readonly LockStrategyName[] = (process.env.DB_LOCK_TEST_STRATEGIES ?? LOCK_STRATEGY_NAMES.join(','))
  .split(',')
  .map((s) => s.trim())
  .filter(isLockStrategyName);
// A list that names no strategy would register no suite and pass in silence.
if (STRATEGIES.length === 0) throw new Error(`DB_LOCK_TEST_STRATEGIES names no strategy of ${LOCK_STRATEGY_NAMES.join(', ')}`);

/** Registers one copy of a suite per strategy (its describe names should include the strategy). */
export function forEachStrategy(suite: (strategy: LockStrategyName) => void): void {
  for (const strategy of STRATEGIES) suite(strategy);
}
