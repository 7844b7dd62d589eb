import type { Logger } from '@nestjs/common';
import type { DiscoveryService } from '@nestjs/core';
import type { FenceScope } from '../core/fenced-transaction.js';
import type { LockService } from '../lock.service.js';
import { clsFenceScope, findTransactionHosts } from './cls-transaction.js';
import { EscapedWriteGuard } from './escaped-writes.js';
import { FencedStatementWatch } from './fenced-statement-watch.js';

/** Nest's DiscoveryService per LockService built by DbLockModule (a LockService built by hand has none). */
const discoveries = new WeakMap<LockService, DiscoveryService>();
/** Running guards, removed from their DataSource at shutdown. */
const guards = new WeakMap<LockService, EscapedWriteGuard>();
const watches = new WeakMap<LockService, FencedStatementWatch>();

export function attachIntegrations(service: LockService, discovery: DiscoveryService): void {
  discoveries.set(service, discovery);
}

const FIX_PLAIN =
  'Write through lockService.manager (lockService.manager.getRepository(Entity) rather than an @InjectRepository ' +
  'repository), or install @nestjs-cls/transactional with its TypeORM adapter: fenced calls then run as its current ' +
  'transaction (TransactionHost.tx).';
const FIX_CLS =
  'Write through TransactionHost.tx (txHost.tx.getRepository(Entity) rather than an @InjectRepository repository; ' +
  "fenced calls run as @nestjs-cls/transactional's current transaction) or lockService.manager.";

/**
 * Starts what runs around fenced calls of `service`, at module init (every provider exists by
 * then): the @nestjs-cls/transactional binding when a TransactionHost serves its DataSource, and
 * the fenced-statement watch, and the escaped-write guard unless `escapedWrites: 'ignore'` (both watch statements, not calls).
 * Returns the scope fenced work runs in (undefined when there is nothing to do, so the fenced path
 * costs nothing more).
 */
export async function startIntegrations(service: LockService, logger: Logger): Promise<FenceScope | undefined> {
  const { options, dataSource, dataSourceName } = service;
  const hosts = await findTransactionHosts(options.transactionHost, discoveries.get(service), dataSource, dataSourceName, logger);
  if (hosts.length > 0)
    logger.log(
      `Fenced calls on DataSource '${dataSourceName}' run as @nestjs-cls/transactional's current transaction (${hosts.length} TransactionHost(s)).`,
    );
  const ambient = hosts.length > 0 ? clsFenceScope(hosts) : undefined;
  const watch = new FencedStatementWatch(dataSource);
  watch.install();
  watches.set(service, watch);
  if (options.escapedWrites === 'ignore') return ambient;
  const guard = new EscapedWriteGuard(dataSource, dataSourceName, options.escapedWrites, logger, hosts.length > 0 ? FIX_CLS : FIX_PLAIN);
  guard.install();
  guards.set(service, guard);
  return ambient;
}

export function stopIntegrations(service: LockService): void {
  guards.get(service)?.uninstall();
  guards.delete(service);
  watches.get(service)?.uninstall();
  watches.delete(service);
}
