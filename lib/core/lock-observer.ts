import type { Logger } from '@nestjs/common';
import type { LockEvent, LockEventListener } from './lock-events.js';
import type { LockLabels, LockMetrics } from './lock-metrics.js';
import type { HolderMode, LockMode } from './lock-mode.js';
import { LockStats, type LockStatsSnapshot } from './lock-stats.js';
import type { LockStrategyName } from '../strategies/lock-strategy-name.js';

/** What the observer needs to know about a lock; HeldLock provides it. */
export interface ObservedLock {
  readonly keys: readonly string[];
  readonly mode: LockMode;
  readonly fencingToken: number;
  readonly grantedAt: number;
  readonly internal: boolean;
  readonly strategy: LockStrategyName;
  /** What metrics call it (`lock.name`). */
  readonly name: string;
}

/**
 * The one place where what happens to locks is counted (`stats()`, OpenTelemetry metrics when
 * installed), announced (`onEvent`) and logged when slow. Everything else reports here and never
 * touches a counter. The library's own locks (the janitor's) are neither counted nor announced.
 */
export class LockObserver {
  private readonly stats = new LockStats();

  constructor(
    private readonly logger: Logger,
    private readonly settings: { readonly slowThresholdMs: number; readonly onEvent: LockEventListener | undefined },
    private readonly metrics?: LockMetrics,
  ) {}

  acquired(lock: ObservedLock, waitedMs: number, reclaimed: number): void {
    if (lock.internal) return;
    this.stats.acquired++;
    this.stats.wait.add(waitedMs);
    this.metrics?.acquired(lock, labelsOf(lock), waitedMs);
    if (reclaimed > 0) this.reclaimed(lock.keys, lock.mode, reclaimed, labelsOf(lock));
    if (waitedMs > this.settings.slowThresholdMs) this.logger.warn(`Waited ${Math.round(waitedMs)} ms for ${describeLock(lock)}`);
    if (this.settings.onEvent) this.emit({ type: 'acquired', keys: lock.keys, mode: lock.mode, fencingToken: lock.fencingToken, waitedMs });
  }

  reentrant(): void {
    this.stats.reentrant++;
  }

  released(lock: ObservedLock, releaseMs: number): void {
    if (lock.internal) return;
    const heldMs = performance.now() - lock.grantedAt;
    this.stats.released++;
    this.stats.hold.add(heldMs);
    this.metrics?.ended(lock, labelsOf(lock), heldMs, 'released');
    if (releaseMs > this.settings.slowThresholdMs) this.logger.warn(`Releasing ${describeLock(lock)} took ${Math.round(releaseMs)} ms`);
    if (heldMs > this.settings.slowThresholdMs) this.logger.warn(`${describeLock(lock)} was held for ${Math.round(heldMs)} ms`);
    if (this.settings.onEvent) this.emit({ type: 'released', keys: lock.keys, mode: lock.mode, fencingToken: lock.fencingToken, heldMs });
  }

  timedOut(keys: readonly string[], mode: LockMode, waitedMs: number, labels: LockLabels): void {
    this.stats.timedOut++;
    this.metrics?.attempted(labels, 'timed_out', waitedMs);
    this.emit({ type: 'timed-out', keys, mode, waitedMs });
  }

  skipped(keys: readonly string[], mode: LockMode, waitedMs: number, labels: LockLabels): void {
    this.stats.skipped++;
    this.metrics?.attempted(labels, 'skipped', waitedMs);
    this.emit({ type: 'skipped', keys, mode, waitedMs });
  }

  lost(lock: ObservedLock, error: Error): void {
    if (lock.internal) return;
    this.stats.lost++;
    this.logger.warn(error.message);
    const heldMs = performance.now() - lock.grantedAt;
    this.metrics?.ended(lock, labelsOf(lock), heldMs, 'lost');
    this.emit({ type: 'lost', keys: lock.keys, mode: lock.mode, fencingToken: lock.fencingToken, heldMs, error });
  }

  /** A caller starts waiting for a grant (`db_lock.waiting` +1); call what it returns with the verdict (-1). */
  waitStarted(waiter: LockLabels & { readonly internal: boolean }): <T>(verdict: T) => T {
    const metrics = waiter.internal ? undefined : this.metrics;
    if (!metrics) return unchanged; // nothing to count: no closure per acquisition
    const labels = { name: waiter.name, mode: waiter.mode, strategy: waiter.strategy };
    metrics.waiting(labels, 1);
    return (verdict) => {
      metrics.waiting(labels, -1);
      return verdict;
    };
  }

  /** A fenced transaction rolled back because its lock was lost (LockLostError at the fence). */
  fenceRefused(lock: ObservedLock): void {
    if (!lock.internal) this.metrics?.fenceRefused(labelsOf(lock));
  }

  /** Holders whose lease had run out, ended by a grant's takeover or by the janitor. */
  reclaimed(keys: readonly string[], mode: LockMode, count: number, by?: LockLabels): void {
    this.stats.reclaimed += count;
    this.metrics?.takeovers(count, by);
    this.emit({ type: 'reclaimed', keys, mode, count });
  }

  renewed(locks: number, ms: number): void {
    this.stats.renewals++;
    this.stats.renewal.add(ms);
    this.stats.renewedLocks += locks;
    if (locks > 0) this.emit({ type: 'renewed', keys: [], mode: 'write', count: locks });
  }

  renewalFailed(error: unknown, locks: number): void {
    this.stats.renewalFailures++;
    this.logger.warn(`Lease renewal of ${locks} lock(s) failed, retrying while leases last: ${String(error)}`);
    this.emit({ type: 'renewal-failed', keys: [], mode: 'write', count: locks, error });
  }

  forceReleased(key: string, holders: readonly { mode: HolderMode; holder: string }[], reason: string): void {
    this.stats.forceReleased += holders.length;
    this.logger.warn(`Force-released '${key}' (${holders.map((h) => `${h.mode} holder ${h.holder}`).join(', ')}): ${reason}`);
  }

  janitorSkipped(): void {
    this.stats.janitor.skipped++;
  }

  janitorFinished(failed: boolean): void {
    if (failed) this.stats.janitor.failures++;
    else this.stats.janitor.runs++;
  }

  janitorBatch(work: { reclaimedKeys?: readonly string[]; reclaimed?: number; pruned?: number; reapedKeys?: number }): void {
    const janitor = this.stats.janitor;
    janitor.batches++;
    if (work.reclaimed) {
      janitor.reclaimed += work.reclaimed;
      this.reclaimed(work.reclaimedKeys ?? [], 'write', work.reclaimed);
    }
    if (work.pruned) janitor.pruned += work.pruned;
    if (work.reapedKeys) janitor.reapedKeys += work.reapedKeys;
  }

  /** Calls `onEvent`; a listener that throws, or (async) rejects, is logged, never rethrown into lock code nor left unhandled. */
  emit(event: LockEvent): void {
    const listener = this.settings.onEvent;
    if (!listener) return;
    try {
      const returned: unknown = listener(event);
      if (typeof (returned as PromiseLike<unknown> | undefined)?.then === 'function')
        (returned as PromiseLike<unknown>).then(undefined, (error: unknown) => this.listenerFailed(event, error));
    } catch (error) {
      this.listenerFailed(event, error);
    }
  }

  private listenerFailed(event: LockEvent, error: unknown): void {
    this.logger.error(`onEvent listener threw on '${event.type}': ${String(error)}`);
  }

  snapshot(current: Pick<LockStatsSnapshot, 'held' | 'waiting' | 'roundTrips' | 'roundTripsBy'>): LockStatsSnapshot {
    return this.stats.snapshot(current);
  }
}

const unchanged = <T>(verdict: T): T => verdict;

function labelsOf(lock: ObservedLock): LockLabels {
  return { name: lock.name, mode: lock.mode, strategy: lock.strategy };
}

function describeLock(lock: ObservedLock): string {
  return `${lock.mode} lock on ${lock.keys.map((k) => `'${k}'`).join(', ')}`;
}
