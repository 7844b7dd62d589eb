import type { EntityManager } from 'typeorm';
import { type HeldLock, minDate } from './held-lock.js';
import type { LockHandle } from './lock-handle.js';
import { LockLostError } from '../errors/lock-lost.error.js';
import type { LockTarget } from './lock-key.js';
import type { LockMode } from './lock-mode.js';
import type { LockStrategyName } from '../strategies/lock-strategy-name.js';

/**
 * An acquisition inside a call chain that already holds some or all of its keys. Keys the chain
 * holds cost no SQL: they share the outer locks' tokens, lease and signal. Keys it does not hold
 * yet were granted as `own` (a normal lock), which is all that `release()` gives back.
 */
export class NestedLock implements LockHandle {
  readonly keys: readonly string[];
  readonly mode: LockMode;
  readonly modes: Readonly<Record<string, LockMode>>;
  readonly fencingTokens: Readonly<Record<string, number>>;
  readonly signal: AbortSignal;
  private done = false;

  constructor(
    targets: readonly LockTarget[],
    /** The lock holding each key, by stored key: an outer lock, or `own`. */
    private readonly holders: ReadonlyMap<string, HeldLock>,
    readonly own: HeldLock | undefined,
  ) {
    this.keys = Object.freeze(targets.map((t) => t.key));
    this.mode = targets.some((t) => t.mode === 'write') ? 'write' : 'read';
    this.modes = Object.freeze(Object.fromEntries(targets.map((t) => [t.key, t.mode])));
    this.fencingTokens = Object.freeze(Object.fromEntries(targets.map((t) => [t.key, holders.get(t.storedKey)!.fencingTokens[t.key] ?? 0])));
    const locks = [...new Set(holders.values())];
    this.signal = locks.length === 1 ? locks[0]!.signal : AbortSignal.any(locks.map((l) => l.signal));
  }

  get reentrant(): boolean {
    return this.own === undefined;
  }
  get strategy(): LockStrategyName {
    return (this.own ?? [...this.holders.values()][0]!).strategy;
  }
  get manager(): EntityManager | undefined {
    for (const lock of this.holders.values()) if (lock.manager) return lock.manager;
    return undefined;
  }
  get fencingToken(): number {
    return this.fencingTokens[this.keys[0]!]!;
  }
  get expiresAt(): Date {
    return minDate([...this.holders.values()].map((l) => l.expiresAt));
  }
  get released(): boolean {
    return this.done || [...this.holders.values()].some((l) => l.released);
  }
  release(): Promise<void> {
    return this.releaseAs(false);
  }
  async releaseAs(failed: boolean): Promise<void> {
    if (this.done) return;
    this.done = true;
    if (this.own) await this.own.releaseAs(failed);
  }
  holdersByKey(): ReadonlyMap<string, HeldLock> {
    return this.holders;
  }
  /** After this handle's release() it extends nothing (the outer locks are not its own to extend), as a released lock refuses. */
  async extend(leaseMs?: number): Promise<void> {
    if (this.done) throw new LockLostError(this.keys[0]!, this.fencingToken, 'it was already released; it cannot be extended');
    for (const lock of new Set(this.holders.values())) await lock.extend(leaseMs);
  }
}
