import { LockLostError } from '../errors/lock-lost.error.js';
import type { HeldLock } from '../held-lock.js';
import type { LockStore } from '../storage/lock-store.js';

/** Most owners renewed by one statement; 10,000 held locks are two statements per tick. */
const OWNERS_PER_STATEMENT = 5000;

export interface LeaseWatchdogHooks {
  /** The lock is gone: abort its signal, forget it locally, count and report it. */
  lost(lock: HeldLock, error: LockLostError): void;
  /** One renewal statement succeeded: `count` leases renewed, the statement took `ms`. */
  renewed(count: number, ms: number): void;
  renewalFailed(error: unknown, locks: number): void;
}

/**
 * Keeps the leases of this process's locks alive: every tick (a third of the shortest lease,
 * or renewIntervalMs) one statement renews every held lock at once, conditional on each still
 * being live, so it never resurrects a released or reclaimed lock. A lock whose row is no longer
 * live, or whose lease ran out while renewals kept failing, or held past maxHoldMs, is lost.
 */
export class LeaseWatchdog {
  private readonly locks = new Set<HeldLock>();
  private timer: NodeJS.Timeout | undefined;
  private intervalMs = Infinity;
  private ticking = false;
  private stopped = false;

  constructor(
    private readonly store: LockStore,
    private readonly hooks: LeaseWatchdogHooks,
    private readonly settings: { renewIntervalMs: number | undefined; maxHoldMs: number },
  ) {}

  get size(): number {
    return this.locks.size;
  }

  add(lock: HeldLock): void {
    if (this.stopped) return;
    this.locks.add(lock);
    const wanted = this.intervalFor(lock.leaseMs);
    if (wanted < this.intervalMs || !this.timer) this.schedule(wanted);
  }

  remove(lock: HeldLock): void {
    this.locks.delete(lock);
    if (this.locks.size === 0) this.clear();
  }

  /** Stops for good: no timer stays behind (shutdown). */
  stop(): void {
    this.stopped = true;
    this.locks.clear();
    this.clear();
  }

  /** Runs one renewal now (tests and shutdown drills use it; ticks call it too). */
  async tick(): Promise<void> {
    if (this.ticking || this.stopped) return;
    this.ticking = true;
    try {
      await this.renewAll();
    } finally {
      this.ticking = false;
      if (this.locks.size > 0 && !this.stopped) this.schedule(this.shortestInterval());
      else this.clear();
    }
  }

  private async renewAll(): Promise<void> {
    const now = performance.now();
    const due: HeldLock[] = [];
    for (const lock of this.locks) {
      if (!lock.live) {
        this.locks.delete(lock);
        continue;
      }
      if (now - lock.acquiredAt > this.settings.maxHoldMs) {
        this.locks.delete(lock);
        this.hooks.lost(lock, lostError(lock, `held longer than maxHoldMs (${this.settings.maxHoldMs} ms)`));
        continue;
      }
      if (!lock.fencing) due.push(lock);
    }
    if (due.length === 0) return;
    for (let i = 0; i < due.length; i += OWNERS_PER_STATEMENT) {
      await this.renewBatch(due.slice(i, i + OWNERS_PER_STATEMENT));
    }
  }

  private async renewBatch(batch: HeldLock[]): Promise<void> {
    const sentAt = performance.now();
    let live: Map<string, { live: number; expiresAt: Date }>;
    try {
      // Bounded by the LONGEST remaining lease (at least 1 s), not the most urgent one: a renewal
      // that succeeds late still renews every lock nobody took over, while a tight bound made
      // one slow statement under load (10,000 rows) fail again and again until every lock of
      // the batch was lost. Only a renewal that fails past a lock's deadline loses that lock.
      const timeoutMs = Math.max(1000, ...batch.map((l) => l.leaseDeadline - sentAt));
      live = await this.store.renew(
        batch.map((l) => l.owner),
        timeoutMs,
      );
    } catch (error) {
      this.hooks.renewalFailed(error, batch.length);
      // Retried next tick while the lease may still be valid; past it the holder must stop.
      const after = performance.now();
      for (const lock of batch) {
        if (lock.live && after >= lock.leaseDeadline) {
          this.locks.delete(lock);
          this.hooks.lost(lock, lostError(lock, 'its lease ran out while renewals failed', error));
        }
      }
      return;
    }
    let renewed = 0;
    for (const lock of batch) {
      if (!lock.live) continue; // released while the renewal was in flight
      const row = live.get(lock.owner);
      if (row && row.live === lock.targets.length) {
        lock.expiresAt = row.expiresAt;
        lock.leaseDeadline = sentAt + lock.leaseMs;
        renewed++;
      } else {
        this.locks.delete(lock);
        this.hooks.lost(
          lock,
          lostError(lock, 'its log rows were ended by someone else (taken over or reclaimed after its lease ran out, or force-released)'),
        );
      }
    }
    this.hooks.renewed(renewed, performance.now() - sentAt);
  }

  private intervalFor(leaseMs: number): number {
    return this.settings.renewIntervalMs ?? Math.max(10, Math.floor(leaseMs / 3));
  }

  private shortestInterval(): number {
    let shortest = Infinity;
    for (const lock of this.locks) shortest = Math.min(shortest, this.intervalFor(lock.leaseMs));
    return shortest;
  }

  private schedule(intervalMs: number): void {
    this.clear();
    this.intervalMs = intervalMs;
    this.timer = setTimeout(() => void this.tick(), intervalMs);
    this.timer.unref();
  }

  private clear(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.intervalMs = Infinity;
  }
}

function lostError(lock: HeldLock, reason: string, cause?: unknown): LockLostError {
  return new LockLostError(lock.keys[0]!, lock.fencingToken, reason, cause === undefined ? undefined : { cause });
}
