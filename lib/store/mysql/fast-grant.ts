import type { LockConnectionPool } from './lock-connection-pool.js';
import type { GrantInput, GrantOutcome } from './grant.sql.js';
import { fastSingleKeyGrantPlan, isFastGrantRefusal } from './fast-grant.sql.js';
import type { KnownFreeKeys } from '../known-free-keys.js';
import { runPlan, type StatementPlan } from './statement-plan.js';
import type { GrantAnswer } from '../lock-store.js';
import type { LockStatementError } from '../lock-statement.error.js';

/** What follows a fast try (see FastGrant.tryGrant). */
export interface FastGrantHandlers {
  granted(outcome: Extract<GrantOutcome, { granted: true }>): GrantAnswer | Promise<GrantAnswer>;
  refused(): Promise<GrantAnswer>;
  failed(failure: LockStatementError): Promise<GrantAnswer>;
}

/** A key refused this recently goes straight to the full plan: a contended key's refused fast try would cost a round trip more. */
const CONTENDED_FOR_MS = 1_000;
/** Bound on the keys remembered as contended (cleared when reached: forgetting only costs a fast try). */
const CONTENDED_KEYS_MAX = 10_000;

/**
 * The fast single-key grant (see fastSingleKeyGrantPlan) and what it needs beside its SQL: which
 * keys were refused lately, and an estimate of the server clock for the lease end it reports
 * without reading it back (from the process lease's registration and renewals).
 */
export class FastGrant {
  private readonly contended = new Map<string, number>();

  private serverOffsetMs = 0;

  constructor(
    private readonly pool: LockConnectionPool,
    /** Keys whose grant needs no log search: told of every grant and of every durable end (release or fenced commit). */
    readonly knownFree: KnownFreeKeys,
  ) {}

  /** A reading of the server clock taken between two local wall-clock times. */
  observeServerClock(serverNow: Date, sentAt: number, receivedAt: number): void {
    if (!Number.isNaN(serverNow.getTime())) this.serverOffsetMs = serverNow.getTime() - (sentAt + receivedAt) / 2;
  }

  /** For one key, not a semaphore, not refused lately. */
  applies(input: GrantInput): boolean {
    if (input.targets.length !== 1 || input.targets[0]!.semaphoreLimit !== undefined) return false;
    const refusedAt = this.contended.get(input.targets[0]!.storedKey);
    return refusedAt === undefined || performance.now() - refusedAt > CONTENDED_FOR_MS;
  }

  /** After a doorbell wait: for one key, not a semaphore, whatever was refused lately (the bell says the holder let go). */
  afterBell(input: GrantInput): { readonly fits: boolean; readonly serverNow: () => number } {
    return { fits: input.targets.length === 1 && input.targets[0]!.semaphoreLimit === undefined, serverNow: this.serverNow };
  }

  /** The server clock's estimate, in ms since the epoch. */
  private readonly serverNow = (): number => Date.now() + this.serverOffsetMs;

  noteRefused(input: GrantInput): void {
    if (this.contended.size >= CONTENDED_KEYS_MAX) this.contended.clear();
    for (const target of input.targets) this.contended.set(target.storedKey, performance.now());
  }

  /**
   * One try at the floor's shape, its answer handled in the driver's callback: `granted` with the
   * grant; `refused` when the key was taken meanwhile (nothing was written; the full plan follows,
   * and notes the key if it refuses too); `failed` on any other failure. `onOpened`: see QueryOptions.
   */
  tryGrant(input: GrantInput, deadline: number, then: FastGrantHandlers, onOpened?: (ms: number) => void): Promise<GrantAnswer> {
    const key = input.targets[0]!.storedKey;
    const plan = fastSingleKeyGrantPlan(input, this.serverNow, this.knownFree.tokenOf(key));
    const handled: StatementPlan<GrantAnswer | Promise<GrantAnswer>> = {
      statements: plan.statements,
      parse: (results) => then.granted(plan.parse(results) as Extract<GrantOutcome, { granted: true }>),
    };
    const rescue = (error: LockStatementError): Promise<GrantAnswer> => {
      if (!isFastGrantRefusal(error)) return then.failed(error);
      this.knownFree.forget(key);
      return then.refused();
    };
    return runPlan(
      this.pool,
      handled,
      { purpose: 'locks', deadline, connectBy: input.connectBy, oneByOne: false, onOpened },
      rescue,
    ) as Promise<GrantAnswer>;
  }
}
