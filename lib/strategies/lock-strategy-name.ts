/**
 * How a lock is held:
 * - 'lease' (default): a log row with a lease, renewed by this process; holds no database
 *   connection while held, so any number of locks cost no connections; a crashed holder's lock
 *   is free again after its lease.
 * - 'row-lock': an InnoDB row lock kept by an open transaction on a connection of the app's
 *   DataSource, in which the locked work runs; the server queues waiters and hands the lock over
 *   at COMMIT, and frees it the moment the holder's connection closes. One connection per holder.
 */
export type LockStrategyName = 'lease' | 'row-lock';

/** One line per strategy: the list of names (validation, the test list) comes from its keys. */
const SUMMARIES: Readonly<Record<LockStrategyName, string>> = Object.freeze({
  lease: 'a leased log row renewed by the process lease',
  'row-lock': 'a row lock kept by an open transaction',
});

export const LOCK_STRATEGY_NAMES: readonly LockStrategyName[] = Object.freeze(Object.keys(SUMMARIES) as LockStrategyName[]);

/** "'lease' or 'row-lock'", for validation messages. */
export const LOCK_STRATEGY_CHOICES = LOCK_STRATEGY_NAMES.map((n) => `'${n}'`).join(' or ');

export function isLockStrategyName(value: unknown): value is LockStrategyName {
  return LOCK_STRATEGY_NAMES.includes(value as LockStrategyName);
}
