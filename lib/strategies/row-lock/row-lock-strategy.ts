import type { Logger } from '@nestjs/common';
import type { DataSource, QueryRunner } from 'typeorm';
import { backoffDelay } from '../../core/backoff.js';
import type { FencedTransaction } from '../../core/fenced-transaction.js';
import type { HeldLock, HeldLockHost } from '../../core/held-lock.js';
import { type EndStatus, LockStatus } from '../../core/lock-status.js';
import { LockLostError } from '../../errors/lock-lost.error.js';
import { toTypedError } from '../../errors/to-typed-error.js';
import type { LockLogStore, RowLockAuditRow, RowLockStore } from '../../store/lock-store.js';
import { LockStatementError } from '../../store/lock-statement.error.js';
import type { AttemptResult, GrantAttempt, LockStrategy, StrategyCapabilities } from '../lock-strategy.js';
import { ConnectionSlots } from './connection-slots.js';
import { CONNECT_GRACE_MS, connectWithin } from '../../core/connect-within.js';
import { endQuietly, keepOpen, watchJoined } from './open-transaction.js';
import { auditRowsOf, TerminalRows } from './terminal-rows.js';
import { takeKeys } from './take-keys.js';

export interface RowLockSettings {
  readonly retryMinDelayMs: number;
  readonly retryMaxDelayMs: number;
  /** Most callers of this process queued for a connection slot (Infinity: no bound). */
  readonly maxQueued: number;
  /** The DataSource's pool size: row-lock sessions (holders and waiters) never take its last connection. */
  readonly poolSize: number;
  /** A hold longer than this is given up (its transaction abandoned, rolled back by the server). */
  readonly maxHoldMs: number;
}

/** The connection holding the lock's transaction closed, or maxHoldMs passed. */
export interface RowLockHost extends HeldLockHost {
  lost(lock: HeldLock, error: LockLostError, giveBack: boolean): void;
}

/**
 * The pessimistic lock: the lock IS the business transaction. The transaction, on a connection of
 * the app's DataSource, takes an InnoDB lock on the keys' rows of db_lock (an UPDATE that bumps
 * the token for writers, a shared locking read for readers) and keeps it until COMMIT or ROLLBACK;
 * the locked work runs in it. The server queues the waiters, hands the lock over at COMMIT, and
 * frees it the moment the holder's connection closes. No lease, no renewal, no local deadline: a
 * stalled holder keeps its lock, and nobody else gets in, for as long as its transaction is open.
 * The audit rows are written in the commit that ends the hold (terminal, RELEASED, atomically
 * with the work); a hold that rolled back gets its row afterwards, batched (TerminalRows).
 */
export class RowLockStrategy implements LockStrategy {
  readonly name = 'row-lock' as const;
  readonly capabilities: StrategyCapabilities = {
    heldByOpenTransaction: true,
    joinsOpenTransaction: true,
    renewedByProcessLease: false,
    queuesInServer: true,
  };
  private readonly slots: ConnectionSlots;
  private readonly terminal: TerminalRows;
  private readonly abandoners = new Map<HeldLock, () => void>();
  /** Locks taken inside a caller's open transaction, and how to stop watching that transaction for them. */
  private readonly joined = new Map<HeldLock, () => void>();
  /** Holds whose audit rows are written or queued: one row set per hold, whoever ends it first. */
  private readonly recorded = new WeakSet<HeldLock>();
  /** Sessions whose take may be waiting in the database: shutdown cuts them. */
  private readonly taking = new Set<QueryRunner>();
  /** Aborted at shutdown: tries still waiting for a DataSource connection stop waiting. */
  private readonly shutdown = new AbortController();

  constructor(
    readonly host: RowLockHost,
    readonly log: LockLogStore,
    readonly store: RowLockStore,
    private readonly dataSource: DataSource,
    private readonly settings: RowLockSettings,
    logger: Pick<Logger, 'warn'>,
  ) {
    this.slots = new ConnectionSlots(Math.max(1, settings.poolSize - 1), settings.maxQueued);
    this.terminal = new TerminalRows((rows) => store.recordEnded(rows), logger);
  }

  waitsForLocalRelease(): boolean {
    return false; // the server queues waiters and hands over at COMMIT: asking is waiting
  }

  retryDelay(failedTries: number): number {
    return backoffDelay(failedTries, this.settings.retryMinDelayMs, this.settings.retryMaxDelayMs);
  }

  tryGrant(attempt: GrantAttempt): Promise<AttemptResult> {
    if (this.slots.tryTake()) return this.grantOnSlot(attempt);
    // A slot is a connection to come: waited for as a connection is, at least CONNECT_GRACE_MS from the call (a single try included).
    return this.slots
      .take(
        attempt.targets.map((t) => t.key),
        Math.max(attempt.deadline, attempt.startedAt + CONNECT_GRACE_MS),
      )
      .then((taken) => (taken ? this.grantOnSlot(attempt) : {}));
  }

  /**
   * A connection slot is ours: a DataSource connection, the take in its new transaction, and the
   * transaction kept open as the lock. Handlers rather than an async frame: from the take's answer
   * to the caller's work, every step is inside the critical section of a contended key.
   */
  private grantOnSlot(attempt: GrantAttempt): Promise<AttemptResult> {
    if (this.shutdown.signal.aborted) {
      this.slots.give();
      return Promise.resolve({});
    }
    const runner = this.dataSource.createQueryRunner('master');
    let connected = false;
    // Nothing held: the connection (if it came; else connectWithin releases it if it ever comes), then the slot.
    const giveBack = (): Promise<void> => (connected ? endQuietly(runner) : Promise.resolve()).then(() => this.slots.give());
    const failed = (error: unknown): Promise<AttemptResult> =>
      giveBack().then(() => {
        const failure = LockStatementError.from(error);
        if (failure.triedAgain) return { failure };
        throw failure;
      });
    return connectWithin(runner, attempt.deadline, this.shutdown.signal)
      .then((): Promise<AttemptResult> | AttemptResult => {
        connected = true;
        if (this.shutdown.signal.aborted) return {};
        this.taking.add(runner);
        return takeKeys(this, runner, attempt, true);
      })
      .then(
        (result) => {
          this.taking.delete(runner);
          if (!result.lock) return giveBack().then(() => result);
          keepOpen(result.lock, runner, this.store, {
            lost: (lock, error) => this.host.lost(lock, error, true),
            settled: (lock) => {
              this.abandoners.delete(lock);
              this.slots.give();
            },
            abandonWith: (lock, abandonIt) => this.abandoners.set(lock, abandonIt),
            maxHoldMs: this.settings.maxHoldMs,
            isolationLevel: attempt.isolationLevel,
          });
          return result;
        },
        (error: unknown) => {
          this.taking.delete(runner);
          // Cut at shutdown: the caller hears of the shutdown, not of the closed session.
          return this.shutdown.signal.aborted ? giveBack().then(() => ({})) : failed(error);
        },
      );
  }

  /** A nested call inside the chain's fenced transaction: that transaction takes the keys. */
  grantWithin(transaction: FencedTransaction, attempt: GrantAttempt): Promise<AttemptResult> {
    if (this.shutdown.signal.aborted) return Promise.resolve({});
    // Waiting in the server on that transaction's session: shutdown cuts it as any take (cancelTries).
    const runner = transaction.runner;
    this.taking.add(runner);
    return takeKeys(this, runner, attempt, false)
      .then(
        (result) => {
          this.taking.delete(runner);
          if (result.lock) this.watchJoined(result.lock, runner);
          return result;
        },
        (error: unknown) => {
          this.taking.delete(runner);
          throw error;
        },
      )
      .catch((error: unknown) => {
        // The transaction is gone: rolled back by a deadlock (see takeKeys), or its connection lost.
        // Every lock ending with it is lost now, its signal aborted. Any other failure is typed.
        const lost = error instanceof LockLostError ? error : connectionLost(attempt, error);
        if (!lost) throw toTypedError(error, `Taking ${attempt.targets.map((t) => `'${t.key}'`).join(', ')} inside the fenced transaction failed`);
        for (const lock of transaction.endingLocks)
          if (lock.live) this.host.lost(lock, new LockLostError(lock.keys[0]!, lock.fencingToken, lost.reason, { cause: lost.cause }), true);
        throw lost;
      });
  }

  async release(lock: HeldLock, status: EndStatus | typeof LockStatus.EXPIRED, note?: string): Promise<void> {
    this.unwatchJoined(lock);
    const transaction = lock.transaction;
    if (transaction && status === LockStatus.RELEASED) {
      // A plain release commits the lock's own transaction, its audit rows in it.
      try {
        await lock.commitRecord!(transaction.runner, true);
      } catch (error) {
        await transaction.finish(false);
        this.recordEnd(lock, LockStatus.FAILED, 'its commit failed; rolled back');
        const kind = LockStatementError.from(error).kind;
        if (kind === 'connection-lost' || kind === 'retry')
          throw new LockLostError(lock.keys[0]!, lock.fencingToken, 'its transaction could not commit (connection lost or rolled back)', {
            cause: error,
          });
        throw error;
      }
      this.recorded.add(lock);
      await transaction.finish(true);
      return;
    }
    // Given up (lost, maxHoldMs, shutdown) with its transaction still open: the work may still be
    // sending statements on it, so it is abandoned, never rolled back under the running work.
    if (transaction) this.abandoners.get(lock)?.();
    // Without its own transaction (taken inside an outer one), a RELEASED hold is recorded by that transaction's commit.
    if (transaction || status !== LockStatus.RELEASED)
      this.recordEnd(lock, status === LockStatus.RELEASED ? LockStatus.FAILED : status, note ?? null);
  }

  /** No lease to extend: the lock lasts as long as its transaction. */
  async extend(): Promise<boolean> {
    return true;
  }

  /** The lock ended without a release here (its commit ran in a fenced transaction): local clean-up only. */
  dropped(lock: HeldLock): void {
    this.unwatchJoined(lock);
    this.abandoners.get(lock)?.();
  }

  private watchJoined(lock: HeldLock, runner: QueryRunner): void {
    this.joined.set(lock, watchJoined(lock, runner, this.store, { lost: (l, e) => this.host.lost(l, e, true), maxHoldMs: this.settings.maxHoldMs }));
  }
  private unwatchJoined(lock: HeldLock): void {
    this.joined.get(lock)?.();
    this.joined.delete(lock);
  }

  /** Shutdown: takes waiting in the server lose their session (the server drops the wait), callers waiting for a slot stop waiting. */
  cancelTries(): void {
    this.shutdown.abort();
    this.slots.cancelWaits();
    for (const runner of this.taking) void this.store.cutSession(runner);
  }

  /** Shutdown: what still holds is abandoned (the server rolls it back, then its session is gone); pending audit rows are written. */
  async close(): Promise<void> {
    for (const lock of [...this.joined.keys()]) this.unwatchJoined(lock);
    for (const abandonIt of [...this.abandoners.values()]) abandonIt();
    await Promise.all([this.terminal.settle(), this.store.cutSessionsGone()]);
  }

  /** The audit rows of a hold that did not commit, written after its rollback (batched), once. */
  private recordEnd(lock: HeldLock, status: RowLockAuditRow['status'], note: string | null): void {
    if (this.recorded.has(lock)) return;
    this.recorded.add(lock);
    this.terminal.add(auditRowsOf(lock, status, note));
  }
}

/** A take inside a transaction whose connection was lost meanwhile: that transaction, and every lock in it, is gone. */
function connectionLost(attempt: GrantAttempt, error: unknown): LockLostError | undefined {
  if (LockStatementError.from(error).kind !== 'connection-lost') return undefined;
  const reason = 'the connection of the transaction it was taken in was lost: the database rolled that transaction back';
  return new LockLostError(attempt.targets[0]!.key, 0, reason, { cause: error });
}
