import type { Logger } from '@nestjs/common';
import type { DataSource } from 'typeorm';
import { LockJanitor } from './background/janitor.js';
import { LeaseWatchdog } from './background/watchdog.js';
import { CallChain } from './core/call-chain.js';
import type { FenceScope } from './core/fenced-transaction.js';
import { LockObserver } from './core/lock-observer.js';
import { LockRuntime } from './core/lock-runtime.js';
import { DB_LOCK_DEFAULTS, type ResolvedDbLockOptions } from './db-lock.options.js';
import type { LockStore } from './store/lock-store.js';
import { openStore } from './store/open-store.js';
import { createStrategies } from './strategies/registry.js';
import { DataSourceTransactions } from './core/business-transaction.js';
import { businessPoolWarning } from './core/business-pool-warning.js';
import { LockMetrics } from './core/lock-metrics.js';
import { startIntegrations, stopIntegrations } from './integrations/fence-integrations.js';
import type { LockBackendFactory } from './lock-service.backend.js';
import type { LockService } from './lock.service.js';
import { toTypedError } from './errors/to-typed-error.js';
import { DbLockOptionsError } from './errors/db-lock-options.error.js';

function typed<T>(call: Promise<T>, context: string): Promise<T> {
  return call.catch((error: unknown) => {
    throw toTypedError(error, context);
  });
}

/** Everything a running LockService is made of. Built at module init, torn down at shutdown. */
export interface LockServiceParts {
  readonly store: LockStore;
  readonly observer: LockObserver;
  readonly watchdog: LeaseWatchdog;
  readonly runtime: LockRuntime;
  readonly chain: CallChain;
  readonly janitor: LockJanitor;
}

/** Parts of running services, for the library's own tests; never exported to users. */
export const RUNNING_PARTS = new WeakMap<LockService, LockServiceParts>();

/** The default backend: the locks live in the app's database (fence integrations included). */
export const databaseBackend: LockBackendFactory = async (service, logger) => {
  const { options, dataSource, dataSourceName } = service;
  const fenceScope = await startIntegrations(service, logger);
  let parts: LockServiceParts;
  try {
    parts = await assembleLockService(options, dataSource, logger, fenceScope);
  } catch (error) {
    stopIntegrations(service);
    throw error;
  }
  RUNNING_PARTS.set(service, parts);
  const { store, janitor } = parts;
  return {
    ...parts,
    // A store failure reaches the caller as one of the library's typed errors, as the lock calls' do.
    inspect: (key, target) => typed(store.admin.inspect(key, target.bytes), 'inspect() failed'),
    listLocks: (namespace, limit, after) => typed(store.admin.listLocks(namespace, limit, after), 'listLocks() failed'),
    forceRelease: (target, note) => typed(store.admin.forceRelease(target.bytes, note), 'forceRelease() failed'),
    runJanitor: () => janitor.run(),
    roundTrips: () => ({ ...store.roundTrips }),
    start: () => {
      if (options.janitor !== false) janitor.start();
      const warning = businessPoolWarning(store.dataSourcePoolSize(), dataSourceName);
      if (warning) logger.warn(warning);
    },
    stop: () => janitor.stop(),
    close: async () => {
      stopIntegrations(service);
      await store.close();
    },
  };
};

/**
 * Wires the parts: the store for the DataSource's database, the watchdog, every strategy of the
 * registry, the runtime and call chain, the janitor. Fails (closing the store) when the tables are missing.
 */
export async function assembleLockService(
  options: ResolvedDbLockOptions,
  dataSource: DataSource,
  logger: Logger,
  fenceScope?: FenceScope,
): Promise<LockServiceParts> {
  const store = await openStore(dataSource, { poolSize: options.poolSize, doorbellIdleMs: 2 * options.retryMaxDelayMs + 500 });
  try {
    if (!store.strategies.has(options.strategy))
      throw new DbLockOptionsError([
        `strategy '${options.strategy}' is not available on this database ('${String(dataSource.options.type)}'): use ${[...store.strategies].map((s) => `'${s}'`).join(' or ')}`,
      ]);
    const observer = new LockObserver(logger, options, await LockMetrics.load());
    // The watchdog reports losses to the runtime, which it keeps: wired through a late binding.
    let runtime: LockRuntime | undefined;
    const watchdog = new LeaseWatchdog(
      store.processLease,
      {
        lost: (lock, error, giveBack) => runtime?.lost(lock, error, giveBack),
        renewed: (count, ms) => observer.renewed(count, ms),
        renewalFailed: (error, count) => observer.renewalFailed(error, count),
      },
      { renewIntervalMs: options.renewIntervalMs, maxHoldMs: options.maxHoldMs },
    );
    const host = {
      release: (lock: Parameters<LockRuntime['release']>[0], failed: boolean) => runtime!.release(lock, failed),
      extend: (lock: Parameters<LockRuntime['extend']>[0], leaseMs: number | undefined) => runtime!.extend(lock, leaseMs),
      lost: (lock: Parameters<LockRuntime['lost']>[0], error: Parameters<LockRuntime['lost']>[1], giveBack: boolean) =>
        runtime!.lost(lock, error, giveBack),
      // A signal read past its lock's local deadline: the watchdog gives it up now, as its deadline timer would.
      overdue: () => watchdog.giveUpOverdue(),
    };
    runtime = new LockRuntime(createStrategies({ host, store, dataSource, options, logger }), observer, watchdog, logger);
    const chain = new CallChain(runtime, options, observer, new DataSourceTransactions(dataSource, store.fence, observer), logger, fenceScope);
    // One janitor at a time takes a lease lock; where the store serves no lease, a row-lock (held by an open transaction meanwhile).
    const janitorStrategy = store.strategies.has('lease') ? 'lease' : 'row-lock';
    const janitor = new LockJanitor(
      runtime,
      store.janitor,
      observer,
      options.janitor || DB_LOCK_DEFAULTS.janitor,
      options.leaseMs,
      logger,
      janitorStrategy,
    );
    return { store, observer, watchdog, runtime, chain, janitor };
  } catch (error) {
    await store.close();
    throw error;
  }
}
