import type { Logger } from '@nestjs/common';
import type { DataSource } from 'typeorm';
import type { ResolvedDbLockOptions } from '../db-lock.options.js';
import type { LockStore } from '../store/lock-store.js';
import { LeaseStrategy } from './lease/lease-strategy.js';
import type { LockStrategy } from './lock-strategy.js';
import { LOCK_STRATEGY_NAMES, type LockStrategyName } from './lock-strategy-name.js';
import { type RowLockHost, RowLockStrategy } from './row-lock/row-lock-strategy.js';

/** What a strategy is built from. */
export interface StrategyContext {
  readonly host: RowLockHost;
  readonly store: LockStore;
  readonly dataSource: DataSource;
  readonly options: ResolvedDbLockOptions;
  readonly logger: Pick<Logger, 'warn'>;
}

/** Every strategy by name; the compiler refuses a name of LockStrategyName without its entry. */
const STRATEGIES: Readonly<Record<LockStrategyName, (context: StrategyContext) => LockStrategy>> = {
  lease: ({ host, store, options }) =>
    new LeaseStrategy(
      host,
      store.log,
      { writerPreference: options.writerPreference, retryMinDelayMs: options.retryMinDelayMs, retryMaxDelayMs: options.retryMaxDelayMs },
      store.doorbells,
    ),
  'row-lock': ({ host, store, dataSource, options, logger }) => {
    const poolSize = store.dataSourcePoolSize();
    return new RowLockStrategy(
      host,
      store.log,
      store.rowLocks,
      dataSource,
      {
        retryMinDelayMs: options.retryMinDelayMs,
        retryMaxDelayMs: options.retryMaxDelayMs,
        poolSize,
        maxQueued: options.maxRowLockWaiters ?? Infinity,
        maxHoldMs: options.maxHoldMs,
      },
      logger,
    );
  },
};

/** The strategies the store serves, each built once. */
export function createStrategies(context: StrategyContext): Map<LockStrategyName, LockStrategy> {
  return new Map(LOCK_STRATEGY_NAMES.filter((name) => context.store.strategies.has(name)).map((name) => [name, STRATEGIES[name](context)]));
}
