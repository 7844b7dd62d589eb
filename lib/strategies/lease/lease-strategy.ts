import { randomUUID } from 'node:crypto';
import { backoffDelay } from '../../core/backoff.js';
import { HeldLock, type HeldLockHost } from '../../core/held-lock.js';
import type { EndStatus, LockStatus } from '../../core/lock-status.js';
import type { Bell, BellWait, DoorbellStore } from '../../store/doorbell-store.js';
import type { GrantAnswer, LockLogStore } from '../../store/lock-store.js';
import { LockStatementError } from '../../store/lock-statement.error.js';
import { SemaphoreLimitError } from '../../errors/semaphore-limit.error.js';
import type { LockLostError } from '../../errors/lock-lost.error.js';
import { CONNECT_GRACE_MS } from '../../core/connect-within.js';
import { explainLoss } from '../explain-loss.js';
import type { AttemptResult, GrantAttempt, LockStrategy, StrategyCapabilities } from '../lock-strategy.js';
import type { LockTarget } from '../../core/lock-key.js';

/**
 * How long past the caller's deadline a grant in flight may still answer: the server bounds each
 * of the grant's lock waits to a second, and past this grace the client stops waiting (whatever
 * the grant commits later is given back).
 */
export const GRANT_GRACE_MS = 250;

export interface LeaseSettings {
  readonly writerPreference: boolean;
  readonly retryMinDelayMs: number;
  readonly retryMaxDelayMs: number;
}

/**
 * The default strategy: a lock is a log row with a lease, granted in one short transaction on the
 * library's pool. No connection is held per lock; the process lease keeps every lock alive.
 * Waiters poll with backoff; single-key writers also queue on the key's doorbell (DoorbellStore).
 */
export class LeaseStrategy implements LockStrategy {
  readonly name = 'lease' as const;
  readonly capabilities: StrategyCapabilities = {
    heldByOpenTransaction: false,
    joinsOpenTransaction: false,
    renewedByProcessLease: true,
    queuesInServer: false,
  };
  /** The doorbell each holder keeps while others wait for its key. */
  private readonly bells = new WeakMap<HeldLock, Bell>();

  constructor(
    private readonly host: HeldLockHost,
    private readonly log: LockLogStore,
    private readonly settings: LeaseSettings,
    private readonly doorbells: DoorbellStore | undefined,
  ) {}

  /** A writer waiting for this process's own reader never marks the key: the process holds back its new readers itself. */
  get readersYieldToLocalWriters(): boolean {
    return this.settings.writerPreference;
  }

  waitsForLocalRelease(conflicting: HeldLock): boolean {
    // Others queue on a holder's bell: queue there too, in order, rather than take the key back at
    // the local release (that would starve other processes).
    return !this.bells.has(conflicting);
  }

  retryDelay(failedTries: number): number {
    return backoffDelay(failedTries, this.settings.retryMinDelayMs, this.settings.retryMaxDelayMs);
  }

  tryGrant(attempt: GrantAttempt): Promise<AttemptResult> {
    // No wait before the grant when no bell is involved: the grant goes on the wire first, ahead of
    // whatever the caller starts meanwhile (a decorated call opens its business transaction).
    if (!this.ringsBell(attempt)) return this.ask(attempt, undefined);
    return this.doorbells!.prepare(attempt.targets[0]!.storedKey, attempt.deadline).then((asked) => this.ask(attempt, asked));
  }

  /** The grant, after the bell's wait where there is one. Handlers rather than an async frame: this runs on every acquisition. */
  private ask(attempt: GrantAttempt, asked: Bell | BellWait | undefined): Promise<AttemptResult> {
    const wait = asked?.kind === 'wait' ? asked : undefined;
    const bell = asked?.kind === 'bell' ? asked : undefined;
    const acquisitionId = randomUUID();
    const requestedAt = performance.now();
    const remaining = attempt.deadline - requestedAt;
    // A pool connection is waited for until the caller's own deadline, and at least CONNECT_GRACE_MS:
    // opening one on a cold pool is not waiting, and a single try (timeoutMs 0) must still be sent.
    const connectBy = remaining === Infinity ? undefined : requestedAt + Math.max(CONNECT_GRACE_MS, remaining);
    const hasWriteKey = attempt.targets.some((t) => t.mode === 'write');
    // A waiting writer (not its first try) marks the key so that new readers hold back.
    const markMs =
      this.settings.writerPreference && hasWriteKey && attempt.tries > 0 && remaining > 0
        ? Math.round(Math.min(2 * this.settings.retryMaxDelayMs + 500, remaining + this.settings.retryMaxDelayMs))
        : 0;
    const granting = this.log.grant(
      {
        acquisitionId,
        strategy: 'lease',
        targets: attempt.targets,
        leaseMs: attempt.leaseMs,
        waitedMs: requestedAt - attempt.startedAt,
        writerWaitMarkMs: markMs,
        writerPreference: this.settings.writerPreference,
        doorbell: this.bellNameFor(attempt),
        connectBy,
        onSent: attempt.onSent,
      },
      // The server gives up first (its bound is shorter), so a grant never commits after its caller heard "timeout".
      connectBy === undefined ? Infinity : connectBy + GRANT_GRACE_MS + 500,
      { bell: wait ?? bell, serverBoundMs: remaining === Infinity ? undefined : Math.max(0, remaining) + GRANT_GRACE_MS },
    );
    return granting.then(
      (outcome) => {
        let settledBell: Bell | undefined;
        try {
          settledBell = wait ? this.doorbells!.settle(wait, outcome.before) : bell;
        } catch (error) {
          return this.failed(error, wait, bell);
        }
        return this.answered(attempt, outcome, acquisitionId, requestedAt, wait, settledBell);
      },
      (error: unknown) => this.failed(error, wait, bell),
    );
  }

  private async failed(error: unknown, wait: BellWait | undefined, bell: Bell | undefined): Promise<AttemptResult> {
    const failure = LockStatementError.from(error);
    wait?.cancel();
    if (bell) await bell.ring();
    if (failure.triedAgain) return { failure };
    throw failure;
  }

  private answered(
    attempt: GrantAttempt,
    outcome: GrantAnswer,
    acquisitionId: string,
    requestedAt: number,
    wait: BellWait | undefined,
    bell: Bell | undefined,
  ): AttemptResult | Promise<AttemptResult> {
    if (!outcome.granted) {
      if (outcome.reason === 'limit-mismatch') {
        const target = attempt.targets[0]!;
        throw new SemaphoreLimitError(target.key, target.semaphoreLimit ?? null, outcome.currentLimit);
      }
      // A waiter about to give up must not keep others behind its bell until the bell's idle timeout.
      if (bell && (performance.now() >= attempt.deadline || attempt.tries + 1 >= attempt.maxAttempts)) return bell.ring().then(() => ({}));
      return {};
    }
    const grantedAt = performance.now();
    // The lease counts from the row's insert: at the earliest the first send time plus the server's waits (doorbell, then locks).
    const leaseFrom = (outcome.sentAt ?? requestedAt) + (wait?.waitedMs(outcome.before) ?? 0) + outcome.serverWaitMs;
    const lock = new HeldLock(
      this.host,
      'lease',
      acquisitionId,
      attempt.targets,
      outcome.rows,
      attempt.leaseMs,
      leaseFrom,
      grantedAt,
      grantedAt - attempt.startedAt,
      attempt.internal,
    );
    if (bell) {
      bell.hold();
      this.bells.set(lock, bell);
    }
    if (performance.now() >= lock.localDeadline) {
      // Answered after its lease may have run out on the server: its signal would have to abort at once.
      return this.release(lock, 'RELEASED', 'given back: the grant answered after its lease had run out').then(
        () => ({}),
        () => ({}),
      );
    }
    return { lock, reclaimed: outcome.reclaimed };
  }

  release(lock: HeldLock, status: EndStatus | typeof LockStatus.EXPIRED, note?: string): Promise<void> {
    // With a bell the release goes on the bell's connection and rings it: one round trip.
    return this.log.endRows(lock.rowIds, status, note, this.bells.get(lock), performance.now() - lock.grantedAt).then((ended) => {
      if (ended < lock.rowIds.length) return explainLoss(this.log, lock).then((loss) => Promise.reject(loss));
    });
  }

  async extend(lock: HeldLock, leaseMs: number): Promise<boolean | LockLostError> {
    const rows = await this.log.extend(lock.rowIds, leaseMs);
    if (rows.length < lock.rowIds.length) return explainLoss(this.log, lock);
    lock.expiresAt = new Date(Math.min(...rows.map((r) => r.expiresAt.getTime())));
    return true;
  }

  dropped(lock: HeldLock): void {
    void this.bells.get(lock)?.ring();
  }

  async close(): Promise<void> {}

  /** A first try that waits on the key's bell (see ringsBell) waits before it asks. */
  waitsAtOnce(targets: readonly LockTarget[]): boolean {
    const key = this.bellKeyOf(targets);
    return key !== undefined && this.bellContended(key);
  }

  /** Single-key write requests use doorbells; multi-key and read requests poll. */
  private bellNameFor(attempt: GrantAttempt): string | undefined {
    const key = this.bellKeyFor(attempt);
    return key === undefined ? undefined : this.doorbells!.nameOf(key);
  }

  /** The key whose bell an attempt uses: none for the library's own locks. */
  private bellKeyFor(attempt: GrantAttempt): string | undefined {
    return attempt.internal ? undefined : this.bellKeyOf(attempt.targets);
  }

  /** The key whose bell `targets` would use: one key, written, with doorbells on. */
  private bellKeyOf(targets: readonly LockTarget[]): string | undefined {
    return this.doorbells && targets.length === 1 && targets[0]!.mode === 'write' ? targets[0]!.storedKey : undefined;
  }

  /**
   * A writer the database refused waits on the key's bell before its next try; so does one whose
   * key's bell a local holder has, or rang lately (others were queued on it: asking first would
   * only be refused, and the refusal's full plan costs a round trip on every re-request).
   */
  private ringsBell(attempt: GrantAttempt): boolean {
    const key = this.bellKeyFor(attempt);
    return key !== undefined && (attempt.refusals > 0 || this.bellContended(key));
  }

  private bellContended(key: string): boolean {
    return this.doorbells!.current(key)?.state === 'holding' || this.doorbells!.rungLately(key);
  }
}
