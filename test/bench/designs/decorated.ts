/**
 * Methods decorated exactly as an app would decorate them: `@WriteLock` forwards to
 * `LockService.runLocked` with the default 'requires-new' transaction, and the method reaches that
 * transaction through `lockService.manager`. The key is the first argument ('{0}').
 */
import type { EntityManager } from 'typeorm';
import { type LockService, WriteLock } from '../../../lib/index.js';
import { hostNow } from '../stats.js';
import type { Body, HoldTimes, Query } from './types.js';

/** A Query on an EntityManager (counted by the DataSource's query counter, not here). */
export function managerQuery(manager: EntityManager, counter?: { sent: number }): Query {
  return async (sql, params) => {
    if (counter) counter.sent++;
    return (await manager.query(sql, params)) as Record<string, unknown>[];
  };
}

export class DecoratedWork {
  constructor(private readonly locks: LockService) {}

  /** Lease: grant, then a new READ COMMITTED transaction on the DataSource; the lock ends in its commit. */
  @WriteLock('{0}', { timeoutMs: 120_000 })
  async lease(key: string, body: Body, times: HoldTimes): Promise<void> {
    await this.run(body, times);
  }

  /** Row-lock: the locking transaction is the method's transaction; the lock ends in its commit. */
  @WriteLock('{0}', { timeoutMs: 120_000, strategy: 'row-lock' })
  async rowLock(key: string, body: Body, times: HoldTimes): Promise<void> {
    await this.run(body, times);
  }

  private async run(body: Body, times: HoldTimes): Promise<void> {
    times.acquiredAt = hostNow();
    await body(managerQuery(this.locks.manager));
    times.releasingAt = hostNow();
  }
}
