import { randomUUID } from 'node:crypto';
import { backoffDelay } from '../core/backoff.js';
import { HeldLock, type HeldLockHost } from '../core/held-lock.js';
import { LockLostError } from '../errors/lock-lost.error.js';
import type { AttemptResult, GrantAttempt, LockStrategy } from '../strategies/lock-strategy.js';
import type { LockStrategyName } from '../strategies/lock-strategy-name.js';
import type { InMemoryLockTable } from './in-memory-lock-table.js';
import type { EntityManager, QueryRunner } from 'typeorm';
import type { LockTransaction } from '../core/held-lock.js';

/** What a row-lock holder's transaction is in memory: the test's manager, nothing to commit. */
function inMemoryTransaction(manager: EntityManager | undefined): LockTransaction {
  return { runner: { manager } as QueryRunner, finish: () => Promise.resolve() };
}

/** Pauses between tries while a key is busy: short, since a try costs nothing here. */
const RETRY_MIN_DELAY_MS = 1;
const RETRY_MAX_DELAY_MS = 20;

/**
 * The testing module's strategy: one try is one look at the in-memory table. It stands in for
 * either strategy name (both share one table, so a key is never held both ways at once); the
 * shared runtime above it does the waiting, reentrancy, timeouts, events and signals.
 */
export class InMemoryStrategy implements LockStrategy {
  /** No transaction; held until released (the keeper gives up locks past maxHoldMs). */
  readonly capabilities = { heldByOpenTransaction: false, joinsOpenTransaction: false, renewedByProcessLease: true, queuesInServer: false };

  constructor(
    readonly name: LockStrategyName,
    private readonly host: HeldLockHost,
    private readonly table: InMemoryLockTable,
    private readonly writerPreference: boolean,
    /** For a strategy whose work runs in the lock's own transaction: the manager standing for it (undefined: none given); null: none. */
    private readonly lockManager: EntityManager | undefined | null,
  ) {}

  /** A waiter asks the table again (a try costs nothing) rather than wait for the local release; a release still wakes the waiters at once. */
  waitsForLocalRelease(): boolean {
    return false;
  }

  /**
   * Writer preference as the database strategies apply it inside one process: readers (and permit
   * callers) give way to a writer while it waits in the local queue, and no longer once it gave up
   * (timed out, out of tries): no mark outlives the writer's wait.
   */
  get readersYieldToLocalWriters(): boolean {
    return this.writerPreference;
  }

  retryDelay(failedTries: number): number {
    return backoffDelay(failedTries, RETRY_MIN_DELAY_MS, RETRY_MAX_DELAY_MS);
  }

  tryGrant(attempt: GrantAttempt): Promise<AttemptResult> {
    const acquisitionId = randomUUID();
    const rows = this.table.grant(acquisitionId, this.name, attempt.targets, attempt.leaseMs);
    if (!rows) return Promise.resolve({});
    const grantedAt = performance.now();
    // Nothing can take an in-memory lock over while its process runs: its lease never runs out
    // locally (maxHoldMs, forceRelease and shutdown still end it).
    const lock = new HeldLock(
      this.host,
      this.name,
      acquisitionId,
      attempt.targets,
      rows,
      attempt.leaseMs,
      Infinity,
      grantedAt,
      grantedAt - attempt.startedAt,
      attempt.internal,
    );
    if (this.lockManager !== null) lock.transaction = inMemoryTransaction(this.lockManager);
    return Promise.resolve({ lock, reclaimed: 0 });
  }

  release(lock: HeldLock, status: string, note?: string): Promise<void> {
    const ended = this.table.end(lock.acquisitionId, status, note);
    const holding = this.table.find(lock.acquisitionId);
    // A lock given up on its holder's side (EXPIRED) is kept until the holder's own release hears why.
    if (ended === 0 || status !== 'EXPIRED') this.table.forget(lock.acquisitionId);
    if (ended > 0) return Promise.resolve();
    const how = holding?.ended;
    const reason = how ? `it was ended before release (status ${how.status}${how.note ? `: ${how.note}` : ''})` : 'it was no longer held';
    return Promise.reject(new LockLostError(lock.keys[0]!, lock.fencingToken, reason));
  }

  extend(lock: HeldLock, leaseMs: number): Promise<boolean> {
    const expiresAt = this.table.extend(lock.acquisitionId, leaseMs);
    if (expiresAt) lock.expiresAt = expiresAt;
    return Promise.resolve(expiresAt !== undefined);
  }

  dropped(): void {}

  close(): Promise<void> {
    return Promise.resolve();
  }
}
