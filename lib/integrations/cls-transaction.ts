import type { Logger } from '@nestjs/common';
import type { DiscoveryService } from '@nestjs/core';
import type { DataSource, EntityManager } from 'typeorm';
import type { FenceScope } from '../core/fenced-transaction.js';
import { DbLockError } from '../errors/db-lock.error.js';
import { DbLockOptionsError } from '../errors/db-lock-options.error.js';
import { transactionHosts } from './discovery.js';
import { type BindableTransactionHost, isBindable, type TransactionHostLike, type TransactionHostOption } from './transaction-host.js';

/** Versions the integration was proven with (tests against the real packages). */
export const PROVEN_WITH = '@nestjs-cls/transactional 3.3.0 with @nestjs-cls/transactional-adapter-typeorm 1.4.1 and nestjs-cls 6.3.1';

/**
 * The TransactionHosts whose current transaction a fenced call on `dataSource` becomes.
 * 'auto': every host of the app whose adapter falls back to this DataSource's manager (the TypeORM
 * adapter for it); a host that cannot be bound is reported and skipped. An explicit host must
 * serve this DataSource and be bindable, else the bootstrap fails.
 */
export async function findTransactionHosts(
  option: TransactionHostOption,
  discovery: DiscoveryService | undefined,
  dataSource: DataSource,
  dataSourceName: string,
  logger: Logger,
): Promise<BindableTransactionHost[]> {
  if (option === false) return [];
  if (option !== 'auto') {
    if ((await fallbackOf(option)) !== dataSource)
      throw new DbLockOptionsError([
        `transactionHost does not serve DataSource '${dataSourceName}': its adapter's fallback is another DataSource's manager`,
      ]);
    if (!isBindable(option)) throw new DbLockError(unbindable(dataSourceName));
    return [option];
  }
  if (!discovery) return [];
  const found: BindableTransactionHost[] = [];
  for (const host of transactionHosts(discovery)) {
    if ((await fallbackOf(host)) !== dataSource) continue;
    if (isBindable(host)) found.push(host);
    else logger.warn(unbindable(dataSourceName));
  }
  return found;
}

/**
 * The scope a fenced call's work runs in: a new CLS context (inheriting the caller's values) in
 * which the fenced transaction's EntityManager is each host's current transaction, exactly as the
 * host's own `withTransaction` makes a transaction it opened current. `txHost.tx`, repositories
 * from it and nested `@Transactional()` calls (default propagation REQUIRED) then run in the
 * fence. The caller's context is untouched: after the call, its own transaction (if any) is current again.
 */
export function clsFenceScope(hosts: readonly BindableTransactionHost[]): FenceScope {
  return <T>(manager: EntityManager, work: () => Promise<T>): Promise<T> => {
    const bound = hosts.reduceRight<() => Promise<T>>(
      (inner, host) => () =>
        host.cls.run({ ifNested: 'inherit' }, () => {
          host.setTxInstance(manager);
          return inner();
        }),
      work,
    );
    return bound();
  };
}

/** The DataSource a host's adapter falls back to outside transactions (TypeORM adapter: `dataSource.manager`). */
async function fallbackOf(host: TransactionHostLike): Promise<unknown> {
  try {
    const fallback = await host.withoutTransaction(async () => host.tx);
    const manager = fallback as Partial<EntityManager> & { '@instanceof'?: unknown };
    return manager?.['@instanceof'] === Symbol.for('EntityManager') ? manager.connection : undefined;
  } catch {
    return undefined; // not a host this library can use (another adapter, or not ready)
  }
}

function unbindable(dataSourceName: string): string {
  return (
    `A @nestjs-cls/transactional TransactionHost serves DataSource '${dataSourceName}', but this version does not ` +
    `have what nestjs-db-lock needs to make a fenced transaction its current one (proven with ${PROVEN_WITH}). ` +
    `Fenced calls will not share its transaction: write through lockService.manager, or pass transactionHost: false to silence this.`
  );
}
