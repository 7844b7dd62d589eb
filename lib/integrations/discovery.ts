import type { DiscoveryService } from '@nestjs/core';
import type { DataSource } from 'typeorm';
import { isTransactionHostLike, type TransactionHostLike } from './transaction-host.js';

/** TypeORM marks its DataSources with this (its own cross-copy instanceof check): no import of a second typeorm copy's class needed. */
const DATA_SOURCE_MARK = Symbol.for('DataSource');

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
 * Names of the app's TypeORM DataSources, for error messages: the `name` @nestjs/typeorm passed in
 * the DataSource's options ('default' when none).
 */
export function dataSourceNames(discovery: DiscoveryService): string[] {
  const names = new Set<string>();
  for (const instance of instances(discovery)) {
    const candidate = instance as Partial<DataSource> & { '@instanceof'?: unknown };
    if (!isMarked(candidate, DATA_SOURCE_MARK)) continue;
    const name = (candidate.options as { name?: unknown } | undefined)?.name;
    names.add(typeof name === 'string' && name.length > 0 ? name : 'default');
  }
  return [...names].sort();
}

/** Every @nestjs-cls/transactional TransactionHost of the app (one per `connectionName`). */
export function transactionHosts(discovery: DiscoveryService): TransactionHostLike[] {
  return [...instances(discovery)].filter(isTransactionHostLike);
}

/** `value['@instanceof'] === mark`, false for values (Proxy providers) that throw when read. */
export function isMarked(value: unknown, mark: symbol): boolean {
  try {
    return typeof value === 'object' && value !== null && (value as { '@instanceof'?: unknown })['@instanceof'] === mark;
  } catch {
    return false;
  }
}
