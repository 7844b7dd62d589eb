import type { GrantedRow } from '../core/held-lock.js';
import type { LockTarget } from '../core/lock-key.js';
import type { LockMode } from '../core/lock-mode.js';
import type { LockStrategyName } from '../strategies/lock-strategy-name.js';
import { SemaphoreLimitError } from '../errors/semaphore-limit.error.js';

/** One acquisition, as the lock log would hold it: its keys, tokens and, once ended, why. */
export interface Holding {
  readonly acquisitionId: string;
  readonly strategy: LockStrategyName;
  readonly targets: readonly LockTarget[];
  readonly tokens: ReadonlyMap<string, number>;
  readonly acquiredAt: Date;
  /** Per key, its row's place in grant order (as the database's row ids: listLocks pages by it). */
  readonly rowNumbers: ReadonlyMap<string, number>;
  leaseMs: number;
  expiresAt: Date;
  /** Set when it ended: RELEASED, FAILED, EXPIRED, or the note of whoever ended it. */
  ended?: { readonly status: string; readonly note?: string };
}

interface KeyState {
  /** The per-key fencing counter: grows on every grant, never reset. */
  token: number;
  /** Holders by acquisition: a lock's mode, or 'permit' for a semaphore's. */
  readonly holders: Map<string, LockMode | 'permit'>;
  /** The limit the key's permits are in use with (adopted anew when none is live). */
  limit?: number;
}

/**
 * The lock table and log of the testing module, in memory: per key its holders and fencing
 * counter, per acquisition its rows. The same rules as the database's grant: one writer or any
 * number of readers, all keys or none (readers held back while a writer waits: see
 * InMemoryStrategy.readersYieldToLocalWriters, as inside one process of the database's).
 */
export class InMemoryLockTable {
  private readonly keys = new Map<string, KeyState>();
  private readonly holdings = new Map<string, Holding>();
  private lastRowNumber = 0;
  /** Process name holders report, as `host:pid` does for the database. */
  readonly holder = 'in-memory';

  /** Grants every target or none; undefined when a key is busy. */
  grant(acquisitionId: string, strategy: LockStrategyName, targets: readonly LockTarget[], leaseMs: number): GrantedRow[] | undefined {
    const busy = targets.some((target) => {
      const state = this.keys.get(target.storedKey);
      if (target.semaphoreLimit !== undefined) return this.permitsBusy(target, state);
      if (!state || state.holders.size === 0) return false;
      if (target.mode === 'write') return true;
      // A reader waits for a writer and for a semaphore's permits (a key is a lock or a semaphore, never both at once).
      return [...state.holders.values()].some((mode) => mode !== 'read');
    });
    if (busy) return undefined;
    const expiresAt = new Date(Date.now() + leaseMs);
    const tokens = new Map<string, number>();
    for (const target of targets) {
      const state = this.state(target.storedKey);
      state.token++;
      state.holders.set(acquisitionId, target.semaphoreLimit === undefined ? target.mode : 'permit');
      if (target.semaphoreLimit !== undefined) state.limit = target.semaphoreLimit;
      tokens.set(target.storedKey, state.token);
    }
    const rowNumbers = new Map(targets.map((t) => [t.storedKey, ++this.lastRowNumber]));
    this.holdings.set(acquisitionId, { acquisitionId, strategy, targets, tokens, acquiredAt: new Date(), leaseMs, expiresAt, rowNumbers });
    return targets.map((t) => ({ id: `${acquisitionId}:${t.storedKey}`, storedKey: t.storedKey, fencingToken: tokens.get(t.storedKey)!, expiresAt }));
  }

  /** Ends a live acquisition; how many of its rows were still live (0: someone else ended it first). */
  end(acquisitionId: string, status: string, note?: string): number {
    const holding = this.holdings.get(acquisitionId);
    if (!holding || holding.ended) return 0;
    holding.ended = { status, note };
    for (const target of holding.targets) this.keys.get(target.storedKey)?.holders.delete(acquisitionId);
    return holding.targets.length;
  }

  /** A new lease from now; false when the acquisition has ended. */
  extend(acquisitionId: string, leaseMs: number): Date | undefined {
    const holding = this.holdings.get(acquisitionId);
    if (!holding || holding.ended) return undefined;
    holding.leaseMs = leaseMs;
    holding.expiresAt = new Date(Date.now() + leaseMs);
    return holding.expiresAt;
  }

  /** An acquisition, live or ended (ended ones are kept to explain a later release). */
  find(acquisitionId: string): Holding | undefined {
    return this.holdings.get(acquisitionId);
  }

  /** Live acquisitions holding `storedKey`, oldest first. */
  holdersOf(storedKey: string): Holding[] {
    const ids = this.keys.get(storedKey)?.holders.keys() ?? [];
    return [...ids].map((id) => this.holdings.get(id)!);
  }

  /** Every live acquisition, oldest grant first. */
  live(): Holding[] {
    return [...this.holdings.values()].filter((h) => !h.ended);
  }

  tokenOf(storedKey: string): number {
    return this.keys.get(storedKey)?.token ?? 0;
  }

  /** Forgets an ended acquisition once its holder has heard how it ended. */
  forget(acquisitionId: string): void {
    if (this.holdings.get(acquisitionId)?.ended) this.holdings.delete(acquisitionId);
  }

  /** As the semaphore grant decides: no lock holder, fewer permits than the limit; another limit while permits live is an error. */
  private permitsBusy(target: LockTarget, state: KeyState | undefined): boolean {
    const modes = [...(state?.holders.values() ?? [])];
    if (modes.some((mode) => mode !== 'permit')) return true;
    if (modes.length > 0 && state!.limit !== target.semaphoreLimit) throw new SemaphoreLimitError(target.key, target.semaphoreLimit!, state!.limit!);
    return modes.length >= target.semaphoreLimit!;
  }

  private state(storedKey: string): KeyState {
    let state = this.keys.get(storedKey);
    if (!state) this.keys.set(storedKey, (state = { token: 0, holders: new Map() }));
    return state;
  }
}
