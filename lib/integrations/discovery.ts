import type { DiscoveryService } from '@nestjs/core';
import { isTransactionHostLike, type TransactionHostLike } from './transaction-host.js';

const DATA_SOURCE_SUFFIX = 'DataSource';

/** Every distinct provider instance of the app (all modules), as Nest's DiscoveryService lists them once they exist. */
function instances(discovery: DiscoveryService): Set<unknown> {
  const found = new Set<unknown>();
  for (const wrapper of discovery.getProviders()) {
    // Request-scoped and not-yet-created providers have no instance; reading `instance` on them is safe.
    const instance: unknown = wrapper.isDependencyTreeStatic() ? wrapper.instance : undefined;
    if (instance !== undefined && instance !== null) found.add(instance);
  }
  return found;
}

/**
 * Names of the app's TypeORM DataSources, for error messages. Read from the providers
 * @nestjs/typeorm registers (their tokens, as `getDataSourceToken` makes them: the DataSource class
 * for 'default', '<name>DataSource' otherwise), because the DataSources themselves may still be
 * connecting when this is asked.
 */
export function dataSourceNames(discovery: DiscoveryService): string[] {
  const names = new Set<string>();
  for (const wrapper of discovery.getProviders()) {
    if (wrapper.host?.metatype?.name !== 'TypeOrmCoreModule') continue;
    const token: unknown = wrapper.token;
    if (typeof token === 'function' && token.name === 'DataSource') names.add('default');
    else if (typeof token === 'string' && token.endsWith(DATA_SOURCE_SUFFIX) && token.length > DATA_SOURCE_SUFFIX.length)
      names.add(token.slice(0, -DATA_SOURCE_SUFFIX.length));
  }
  return [...names].sort();
}

/** Every @nestjs-cls/transactional TransactionHost of the app (one per `connectionName`). */
export function transactionHosts(discovery: DiscoveryService): TransactionHostLike[] {
  return [...instances(discovery)].filter(isTransactionHostLike);
}
