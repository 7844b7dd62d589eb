import { randomUUID } from 'node:crypto';
import { backoffDelay } from '../../core/backoff.js';
import { HeldLock, type HeldLockHost } from '../../core/held-lock.js';
import type { AttemptResult, GrantAttempt, LockStrategy } from '../../core/lock-strategy.js';
import type { GrantOutcome } from '../../lock-log/grant.sql.js';
import { endRowsPlan } from '../../lock-log/hold.sql.js';
import { type LockLog, runOn } from '../../lock-log/lock-log.js';
import { explainLoss } from '../../lock-log/loss.js';
import { LockStatementError } from '../../mysql/lock-statement.error.js';
import type { EndStatus } from '../../mysql/sql.js';
import { type Bell, BellRequest, type Doorbells } from './doorbell.js';

/**
 * How long past the caller's deadline a grant in flight may still answer. A grant only waits on a
 * row lock while another grant of the same key is mid-transaction; the server bounds every such
 * wait to a second, and past this grace the client stops waiting (anything the grant may commit
 * later is given back).
 */
export const GRANT_GRACE_MS = 250;

export interface LeaseSettings {
  readonly writerPreference: boolean;
  readonly retryMinDelayMs: number;
  readonly retryMaxDelayMs: number;
}

/**
 * The default strategy: a lock is a log row with a lease, granted in one short transaction on
 * the library's pool and committed at once. Nothing is held open while the lock is held (no
 * connection per lock); the process's one lease row keeps every lock it holds alive. Waiters poll
 * with backoff; contended keys get a doorbell so that the next waiter, in any process, wakes when
 * the holder releases.
 */
export class LeaseStrategy implements LockStrategy {
  readonly name = 'lease' as const;

  constructor(
    private readonly host: HeldLockHost,
    private readonly log: LockLog,
    private readonly settings: LeaseSettings,
    /** undefined: no doorbells (multi-primary cluster). */
    private readonly doorbells: Doorbells | undefined,
  ) {}

  waitsForLocalRelease(conflicting: HeldLock): boolean {
    // A local holder with a doorbell means others queue on the bell: queue there too, in order,
    // rather than take the key back at the local release (that would starve other processes).
    return !conflicting.doorbell;
  }

  retryDelay(failedTries: number): number {
    return backoffDelay(failedTries, this.settings.retryMinDelayMs, this.settings.retryMaxDelayMs);
  }

  async tryGrant(attempt: GrantAttempt): Promise<AttemptResult> {
    const asked = await this.bellFor(attempt);
    const request = asked instanceof BellRequest ? asked : undefined;
    let bell = asked instanceof BellRequest ? undefined : asked;
    const acquisitionId = randomUUID();
    const requestedAt = performance.now();
    const remaining = attempt.deadline - requestedAt;
    const hasWriteKey = attempt.targets.some((t) => t.mode === 'write');
    // A waiting writer (not its first try) marks the key so that new readers hold back.
    const markMs =
      this.settings.writerPreference && hasWriteKey && attempt.tries > 0 && remaining > 0
        ? Math.round(Math.min(2 * this.settings.retryMaxDelayMs + 500, remaining + this.settings.retryMaxDelayMs))
        : 0;
    let outcome: GrantOutcome & { sentAt?: number; before?: unknown };
    try {
      outcome = await this.log.grant(
        {
          acquisitionId,
          strategy: 'lease',
          targets: attempt.targets,
          leaseMs: attempt.leaseMs,
          waitedMs: requestedAt - attempt.startedAt,
          writerWaitMarkMs: markMs,
          writerPreference: this.settings.writerPreference,
          rowLocksAuthoritative: false,
          doorbell: this.bellNameFor(attempt),
        },
        // The client stops waiting a little after the server bound: the server gives up first, so a
        // grant can never commit after its caller was told "timeout".
        remaining === Infinity ? Infinity : requestedAt + Math.max(0, remaining) + GRANT_GRACE_MS + 500,
        {
          via: (request ?? bell)?.connection,
          before: request?.waitStatement,
          serverBoundMs: remaining === Infinity ? undefined : Math.max(0, remaining) + GRANT_GRACE_MS,
        },
      );
      if (request) bell = this.doorbells!.settle(request, outcome.before);
    } catch (error) {
      const failure = LockStatementError.from(error);
      request?.abandon();
      if (bell) await bell.ring();
      // Nothing is held (what an unknown outcome may have granted was given back): the wait queue
      // tries again within the caller's budget, and names this failure if the budget runs out.
      if (failure.kind === 'retry' || failure.kind === 'deadline' || failure.kind === 'interrupted' || failure.kind === 'connection-lost' || failure.kind === 'unreachable')
        return { failure };
      throw failure;
    }
    if (!outcome.granted) {
      // A waiter about to give up must not keep others behind its bell until the bell's idle timeout.
      if (bell && (performance.now() >= attempt.deadline || attempt.tries + 1 >= attempt.maxAttempts)) await bell.ring();
      return {};
    }
    const grantedAt = performance.now();
    // The lease counts on the server from the log rows' insert: at the earliest, the send time of the
    // round trip plus what the server says it waited before that insert (on the doorbell, then on locks).
    const bellWaitStart = request?.startedAt(outcome.before);
    const bellWaitMs = bellWaitStart ? Math.max(0, outcome.serverStartedAt.getTime() - bellWaitStart.getTime()) : 0;
    const leaseFrom = (outcome.sentAt ?? requestedAt) + bellWaitMs + outcome.serverWaitMs;
    const lock = new HeldLock(this.host, 'lease', acquisitionId, attempt.targets, outcome.rows, attempt.leaseMs, leaseFrom, grantedAt, grantedAt - attempt.startedAt, attempt.internal);
    if (bell) {
      bell.hold();
      lock.doorbell = bell;
    }
    if (performance.now() >= lock.localDeadline) {
      // Answered after its lease may have run out on the server (a long doorbell wait plus a slow
      // commit): handing it out would give the caller a signal that must abort at once.
      await this.release(lock, 'RELEASED', 'given back: the grant answered after its lease had run out').catch(() => undefined);
      return {};
    }
    return { lock, reclaimed: outcome.reclaimed };
  }

  async release(lock: HeldLock, status: EndStatus | 'EXPIRED', note?: string): Promise<void> {
    const bell = lock.doorbell as Bell | undefined;
    let ended: number;
    if (bell && bell.state === 'holding') {
      // With a doorbell the release goes on the bell's own connection and rings it: one round trip.
      const plan = endRowsPlan(lock.rowIds, status, note);
      try {
        ended = await runOn(bell.connection, { statements: [...plan.statements, bell.ringStatement], parse: (r) => plan.parse(r) });
        bell.rungWith(true);
      } catch {
        bell.rungWith(false); // the session is closed: its named lock is freed with it
        ended = await this.log.endRows(lock.rowIds, status, note);
      }
    } else {
      if (bell) await bell.ring();
      ended = await this.log.endRows(lock.rowIds, status, note);
    }
    if (ended < lock.rowIds.length) throw await explainLoss(this.log, lock);
  }

  async extend(lock: HeldLock, leaseMs: number): Promise<boolean> {
    const rows = await this.log.extend(lock.rowIds, leaseMs);
    if (rows.length < lock.rowIds.length) return false;
    lock.expiresAt = new Date(Math.min(...rows.map((r) => r.expiresAt.getTime())));
    return true;
  }

  dropped(lock: HeldLock): void {
    const bell = lock.doorbell as Bell | undefined;
    if (bell) void bell.ring();
  }

  async close(): Promise<void> {
    await this.doorbells?.close();
  }

  /** Single-key write requests use doorbells; multi-key and read requests poll. */
  private bellNameFor(attempt: GrantAttempt): string | undefined {
    if (!this.doorbells || attempt.internal || attempt.targets.length !== 1 || attempt.targets[0]!.mode !== 'write') return undefined;
    return this.doorbells.nameOf(attempt.targets[0]!.storedKey);
  }

  /**
   * A writer the database refused waits on the key's bell before its next try (in order with
   * waiters of every process); so does one whose key's bell a holder of this process has.
   */
  private async bellFor(attempt: GrantAttempt): Promise<Bell | BellRequest | undefined> {
    if (!this.doorbells || this.bellNameFor(attempt) === undefined) return undefined;
    const key = attempt.targets[0]!.storedKey;
    if (attempt.refusals === 0 && this.doorbells.current(key)?.state !== 'holding') return undefined;
    return this.doorbells.prepare(key, attempt.deadline);
  }
}

