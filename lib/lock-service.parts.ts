import { hostname } from 'node:os';
import type { Logger } from '@nestjs/common';
import type { DataSource } from 'typeorm';
import { CallChain } from './core/call-chain.js';
import type { FenceScope } from './core/fenced-transaction.js';
import { LockObserver } from './core/lock-observer.js';
import { LockRuntime } from './core/lock-runtime.js';
import type { LockStrategy } from './core/lock-strategy.js';
import type { LockStrategyName } from './core/lock-strategy-name.js';
import { DB_LOCK_DEFAULTS, type ResolvedDbLockOptions } from './db-lock.options.js';
import { LockJanitor } from './lock-log/janitor.js';
import { LeaseWatchdog } from './lock-log/lease-watchdog.js';
import { LockLog } from './lock-log/lock-log.js';
import { businessPoolSize } from './mysql/business-pool.js';
import { LockConnectionPool } from './mysql/lock-connection-pool.js';
import { lockPoolOptions } from './mysql/pool-options.js';
import { detectServerFlavor } from './mysql/server-flavor.js';
import { Doorbells } from './strategies/lease/doorbell.js';
import { LeaseStrategy } from './strategies/lease/lease-strategy.js';
import { RowLockStrategy } from './strategies/row-lock/row-lock-strategy.js';

/** Everything a running LockService is made of. Built at module init, torn down at shutdown. */
export interface LockServiceParts {
  readonly pool: LockConnectionPool;
  readonly bellPool: LockConnectionPool | undefined;
  readonly log: LockLog;
  readonly observer: LockObserver;
  readonly watchdog: LeaseWatchdog;
  readonly runtime: LockRuntime;
  readonly chain: CallChain;
  readonly janitor: LockJanitor;
}

/**
 * Wires the parts: the library's pool and the server's flavour, the lock log and this process's
 * lease row, the watchdog, both strategies, the shared runtime and call chain, the janitor.
 * Fails (closing what it opened) when the tables are missing.
 */
export async function assembleLockService(
  options: ResolvedDbLockOptions,
  dataSource: DataSource,
  logger: Logger,
  fenceScope?: FenceScope,
): Promise<LockServiceParts> {
  const connection = lockPoolOptions(dataSource, options.poolSize);
  const pool = new LockConnectionPool(connection);
  let bellPool: LockConnectionPool | undefined;
  try {
    const flavor = await detectServerFlavor(pool);
    const log = new LockLog(pool, flavor, `${hostname()}:${process.pid}`);
    await log.start();
    const observer = new LockObserver(logger, options);
    // The runtime is the watchdog's host and the watchdog the runtime's keeper: wired through a late binding.
    let runtime: LockRuntime | undefined;
    const watchdog = new LeaseWatchdog(
      log,
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
      lost: (lock: Parameters<LockRuntime['lost']>[0], error: Parameters<LockRuntime['lost']>[1], giveBack: boolean) => runtime!.lost(lock, error, giveBack),
    };
    bellPool = flavor.cluster === 'none' ? new LockConnectionPool({ ...connection, connectionLimit: options.poolSize }) : undefined;
    const doorbells = bellPool ? new Doorbells(bellPool, String(connection.database ?? ''), 2 * options.retryMaxDelayMs + 500) : undefined;
    const retry = { retryMinDelayMs: options.retryMinDelayMs, retryMaxDelayMs: options.retryMaxDelayMs };
    const poolSize = businessPoolSize(dataSource);
    const strategies = new Map<LockStrategyName, LockStrategy>([
      ['lease', new LeaseStrategy(host, log, { ...retry, writerPreference: options.writerPreference }, doorbells)],
      [
        'row-lock',
        new RowLockStrategy(host, log, dataSource, { ...retry, poolSize, maxWaiters: options.maxRowLockWaiters ?? Math.max(1, Math.floor(poolSize / 2)) }),
      ],
    ]);
    runtime = new LockRuntime(strategies, observer, watchdog, logger);
    const chain = new CallChain(runtime, options, observer, dataSource, logger, fenceScope);
    const janitor = new LockJanitor(runtime, log, observer, options.janitor || DB_LOCK_DEFAULTS.janitor, options.leaseMs, logger);
    return { pool, bellPool, log, observer, watchdog, runtime, chain, janitor };
  } catch (error) {
    await bellPool?.close();
    await pool.close();
    throw error;
  }
}
