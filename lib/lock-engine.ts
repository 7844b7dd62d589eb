import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { Logger } from '@nestjs/common';
import type { ResolvedDbLockOptions } from './db-lock.options.js';
import { DbLockError } from './errors/db-lock.error.js';
import { LockLostError } from './errors/lock-lost.error.js';
import { LockTimeoutError } from './errors/lock-timeout.error.js';
import type { LockEvent } from './events/lock-events.js';
import { HeldLock, type HeldLockOwner } from './held-lock.js';
import type { LockTarget } from './lock-key.js';
import { checkLease } from './lock-request.js';
import type { LockMode } from './lock-mode.js';
import { LockStats } from './observability/lock-stats.js';
import { isInternalTarget } from './storage/internal-keys.js';
import type { LockStore } from './storage/lock-store.js';
import { LockStatementAbortedError } from './storage/lock-connection-pool.js';
import { LockStatus } from './storage/lock-tables.js';
import { backoffDelay } from './waiting/backoff.js';
import { WaitQueue, type Waiter } from './waiting/wait-queue.js';
import { LeaseWatchdog } from './watchdog/lease-watchdog.js';

/**
 * How long past the caller's deadline an in-flight grant may run before it is killed on the
 * server. A grant only blocks when another grant of the same key is mid-transaction, so this is
 * the "one round trip" of G7, cut short if a row lock holds it.
 */
export const GRANT_GRACE_MS = 250;

export interface AcquireRequest {
  readonly targets: readonly LockTarget[];
  readonly mode: LockMode;
  readonly timeoutMs: number;
  readonly leaseMs: number;
  /** The caller reports a timeout itself (a skipped job): no 'timed-out' event, no timedOut count. */
  readonly quietTimeout?: boolean;
}

/**
 * The lease strategy's moving parts in one process: wait queues (one poller per key set), the
 * locks this process holds (so local waiters need not poll while a local holder is known), the
 * watchdog, and release/extend. Public API and validation live in LockService.
 */
export class LockEngine implements HeldLockOwner {
  readonly stats = new LockStats();
  readonly holderId = `${hostname()}:${process.pid}`;
  private readonly queues = new Map<string, WaitQueue<HeldLock>>();
  /** The queues waiting on each stored key, so a release wakes exactly those. */
  private readonly queuesByKey = new Map<string, Set<WaitQueue<HeldLock>>>();
  private readonly localHolds = new Map<string, Set<HeldLock>>();
  private readonly watchdog: LeaseWatchdog;
  private closing = false;
  /** Grant attempts on the wire: shutdown waits for them before the pool closes. */
  private readonly inFlight = new Set<Promise<unknown>>();
  /** Internal locks (the janitor's) held now: not part of `heldCount`. */
  private internalHeld = 0;

  constructor(
    readonly store: LockStore,
    private readonly options: ResolvedDbLockOptions,
    private readonly logger: Logger,
  ) {
    this.watchdog = new LeaseWatchdog(
      store,
      {
        lost: (lock, error) => this.lost(lock, error),
        renewed: (count, ms) => {
          this.stats.renewals++;
          this.stats.renewal.add(ms);
          this.stats.renewedLocks += count;
          if (count > 0) this.emit({ type: 'renewed', keys: [], mode: 'write', count });
        },
        renewalFailed: (error, count) => {
          this.stats.renewalFailures++;
          this.logger.warn(`Lease renewal of ${count} lock(s) failed, retrying while leases last: ${String(error)}`);
          this.emit({ type: 'renewal-failed', keys: [], mode: 'write', count, error });
        },
      },
      { renewIntervalMs: options.renewIntervalMs, maxHoldMs: options.maxHoldMs },
    );
  }

  /** Locks this process holds now (not counting nested reentrant handles). */
  get heldCount(): number {
    return this.watchdog.size - this.internalHeld;
  }

  get waitingCount(): number {
    let waiting = 0;
    for (const queue of this.queues.values()) waiting += queue.size;
    return waiting;
  }

  /** Waits for the keys within the request's timeout; LockTimeoutError past it. */
  acquire(request: AcquireRequest): Promise<HeldLock> {
    if (this.closing) return Promise.reject(new DbLockError('The lock service is shutting down: no new locks are granted'));
    const startedAt = performance.now();
    const keys = request.targets.map((t) => t.storedKey);
    // JSON, not a joined string: a key may contain any character, so ids must not collide.
    const id = JSON.stringify(keys);
    let queue = this.queues.get(id);
    if (!queue) {
      const created = new WaitQueue<HeldLock>(this.driver, () => {
        if (created.size > 0 || this.queues.get(id) !== created) return;
        this.queues.delete(id);
        for (const key of keys) {
          const set = this.queuesByKey.get(key);
          set?.delete(created);
          if (set?.size === 0) this.queuesByKey.delete(key);
        }
      });
      queue = created;
      this.queues.set(id, queue);
      for (const key of keys) {
        let set = this.queuesByKey.get(key);
        if (!set) this.queuesByKey.set(key, (set = new Set()));
        set.add(created);
      }
    }
    const target = queue;
    return new Promise<HeldLock>((resolve, reject) => {
      target.enqueue({
        targets: request.targets,
        mode: request.mode,
        leaseMs: request.leaseMs,
        quietTimeout: request.quietTimeout === true,
        deadline: startedAt + request.timeoutMs,
        startedAt,
        tries: 0,
        inFlight: false,
        settled: false,
        resolve,
        reject,
      });
    });
  }

  async releaseHeld(lock: HeldLock, failed: boolean): Promise<void> {
    if (lock.state === 'released' || lock.state === 'releasing') return;
    const wasLost = lock.state === 'lost';
    lock.state = 'releasing';
    this.forget(lock);
    const startedAt = performance.now();
    let ended: number;
    try {
      ended = await this.store.release(lock.owner, failed ? LockStatus.FAILED : LockStatus.RELEASED);
    } catch (error) {
      lock.markLost(error instanceof Error ? error : new Error(String(error)));
      throw error;
    }
    const heldMs = performance.now() - lock.acquiredAt;
    const releaseMs = performance.now() - startedAt;
    if (releaseMs > this.options.slowThresholdMs)
      this.logger.warn(`Releasing ${describeKeys(lock)} took ${Math.round(releaseMs)} ms`);
    if (ended < lock.targets.length) {
      const rows = await this.store.ownerRows(lock.owner).catch(() => []);
      // Ended by someone else: still live (cannot be), EXPIRED (taken over / reclaimed), or
      // RELEASED with a note (force-released by an operator).
      const gone =
        rows.find((r) => r.status !== LockStatus.RELEASED && r.status !== LockStatus.FAILED) ?? rows.find((r) => r.note !== null);
      const key = lock.targets.find((t) => t.storedKey === gone?.storedKey)?.key ?? lock.keys[0]!;
      const error = new LockLostError(
        key,
        lock.fencingTokens[key] ?? lock.fencingToken,
        gone?.status === LockStatus.EXPIRED
          ? `its lease ran out and it was ${gone.note ?? 'taken over'}; the new holder was not touched`
          : `it was ended before release (status ${gone?.status ?? 'unknown'}${gone?.note ? `: ${gone.note}` : ''})`,
      );
      if (!wasLost) this.lost(lock, error);
      lock.markLost(error);
      throw error;
    }
    lock.markReleased();
    if (isInternal(lock)) return;
    this.stats.released++;
    this.stats.hold.add(heldMs);
    if (heldMs > this.options.slowThresholdMs) this.logger.warn(`${describeKeys(lock)} was held for ${Math.round(heldMs)} ms`);
    this.emit({ type: 'released', keys: lock.keys, mode: lock.mode, fencingToken: lock.fencingToken, heldMs });
  }

  async extendHeld(lock: HeldLock, leaseMs: number | undefined): Promise<void> {
    // Validate before any SQL (G9): NaN/Infinity broke the statement, and a negative or tiny lease
    // would have ended the caller's own lease at once.
    const lease = checkLease(leaseMs) ?? lock.leaseMs;
    if (!lock.live) {
      throw new LockLostError(lock.keys[0]!, lock.fencingToken, `it was already ${lock.state}; it cannot be extended`);
    }
    const sentAt = performance.now();
    const rows = await this.store.extend(lock.owner, lease);
    if (rows.length < lock.targets.length) {
      const error = new LockLostError(lock.keys[0]!, lock.fencingToken, 'another holder took it over after its lease ran out');
      this.lost(lock, error);
      throw error;
    }
    lock.leaseMs = lease;
    lock.leaseDeadline = sentAt + lease;
    lock.expiresAt = new Date(Math.min(...rows.map((r) => r.expiresAt.getTime())));
  }

  /** First step of shutdown: refuses new locks and rejects every waiting caller. Idempotent. */
  beginShutdown(): void {
    if (this.closing) return;
    this.closing = true;
    const error = new DbLockError('The lock service shut down while this caller was waiting');
    for (const queue of this.queues.values()) queue.rejectAll(error);
  }

  /**
   * Aborts the signal of every lock still held (they are about to be released at shutdown, so
   * their holders must stop). Returns how many user locks it aborted.
   */
  abortHeld(reason: string): number {
    let aborted = 0;
    for (const lock of this.heldLocks()) {
      if (!lock.live) continue;
      lock.markLost(new LockLostError(lock.keys[0]!, lock.fencingToken, reason));
      if (isInternal(lock)) continue;
      aborted++;
      this.stats.lost++;
      this.emit({ type: 'lost', keys: lock.keys, mode: lock.mode, fencingToken: lock.fencingToken, heldMs: performance.now() - lock.acquiredAt });
    }
    return aborted;
  }

  /**
   * Local locks whose log rows an operator ended (`forceRelease`): lost at once, without waiting
   * for the next renewal to notice.
   */
  ownersEnded(owners: readonly string[], note: string): void {
    const wanted = new Set(owners);
    for (const lock of this.heldLocks()) {
      if (wanted.has(lock.owner) && lock.live) this.lost(lock, new LockLostError(lock.keys[0]!, lock.fencingToken, `it was ${note}`));
    }
  }

  /** Refuses new locks, rejects waiters, waits for grants on the wire, releases what this process holds, stops the watchdog. */
  async close(): Promise<void> {
    this.beginShutdown();
    await Promise.allSettled([...this.inFlight]);
    const held = new Set<HeldLock>();
    for (const locks of this.localHolds.values()) for (const lock of locks) held.add(lock);
    this.watchdog.stop();
    await Promise.allSettled(
      [...held].map((lock) =>
        this.releaseHeld(lock, false).catch((e: unknown) => this.logger.warn(`Release at shutdown failed: ${String(e)}`)),
      ),
    );
  }

  private heldLocks(): Set<HeldLock> {
    const held = new Set<HeldLock>();
    for (const locks of this.localHolds.values()) for (const lock of locks) held.add(lock);
    return held;
  }

  emit(event: LockEvent): void {
    const listener = this.options.onEvent;
    if (!listener) return;
    try {
      listener(event);
    } catch (error) {
      this.logger.error(`onEvent listener threw on '${event.type}': ${String(error)}`);
    }
  }

  /** The wait queues' view of this engine. */
  private readonly driver = {
    attempt: (waiter: Waiter<HeldLock>) => {
      const attempt = this.attempt(waiter);
      this.inFlight.add(attempt);
      const done = (): void => void this.inFlight.delete(attempt);
      attempt.then(done, done);
      return attempt;
    },
    blockedLocally: (waiter: Waiter<HeldLock>) => this.blockedLocally(waiter.targets),
    delay: (failedTries: number) => backoffDelay(failedTries, this.options.retryMinDelayMs, this.options.retryMaxDelayMs),
    timeoutError: (waiter: Waiter<HeldLock>, cause?: unknown) => {
      const waitedMs = performance.now() - waiter.startedAt;
      const keys = waiter.targets.map((t) => t.key);
      if (!waiter.targets.some(isInternalTarget) && !waiter.quietTimeout) {
        this.stats.timedOut++;
        this.emit({ type: 'timed-out', keys, mode: waiter.mode, waitedMs });
      }
      return new LockTimeoutError(keys, waiter.mode, waitedMs, Math.round(waiter.deadline - waiter.startedAt), cause === undefined ? undefined : { cause });
    },
    discard: (lock: HeldLock) => {
      this.releaseHeld(lock, false).catch((e: unknown) => this.logger.warn(`Could not give back an unwanted grant: ${String(e)}`));
    },
  };

  private async attempt(waiter: Waiter<HeldLock>): Promise<HeldLock | undefined> {
    const owner = randomUUID();
    const requestedAt = performance.now();
    const remaining = waiter.deadline - requestedAt;
    const hasWriteKey = waiter.targets.some((t) => t.mode === 'write');
    const markMs =
      this.options.writerPreference && hasWriteKey && remaining > 0
        ? Math.round(Math.min(2 * this.options.retryMaxDelayMs + 500, remaining + this.options.retryMaxDelayMs))
        : 0;
    const outcome = await this.store.tryGrant(
      {
        owner,
        holder: this.holderId,
        targets: waiter.targets,
        leaseMs: waiter.leaseMs,
        waitedMs: requestedAt - waiter.startedAt,
        writerWaitMarkMs: markMs,
        writerPreference: this.options.writerPreference,
      },
      remaining === Infinity ? Infinity : Math.max(0, remaining) + GRANT_GRACE_MS,
    ).catch((error: unknown) => {
      // G7: a try the pool cut short past the caller's deadline (killed on the server, any rows
      // it may have committed already given back by tryGrant) is a timeout, not a failure.
      if (error instanceof LockStatementAbortedError && performance.now() >= waiter.deadline) {
        throw this.driver.timeoutError(waiter, error);
      }
      throw error;
    });
    if (!outcome.granted) return undefined;
    const grantedAt = performance.now();
    const waitedMs = grantedAt - waiter.startedAt;
    const lock = new HeldLock(this, owner, waiter.targets, outcome.rows, waiter.leaseMs, requestedAt, grantedAt, waitedMs);
    if (this.closing) {
      // Granted while shutting down: hand it straight back rather than leave it to expire.
      await this.store.release(owner, LockStatus.RELEASED, 'granted during shutdown').catch(() => 0);
      return undefined;
    }
    for (const target of lock.targets) {
      let set = this.localHolds.get(target.storedKey);
      if (!set) this.localHolds.set(target.storedKey, (set = new Set()));
      set.add(lock);
    }
    this.watchdog.add(lock);
    if (isInternal(lock)) {
      this.internalHeld++;
      return lock;
    }
    this.stats.acquired++;
    this.stats.wait.add(waitedMs);
    if (outcome.reclaimed > 0) {
      this.stats.reclaimed += outcome.reclaimed;
      this.emit({ type: 'reclaimed', keys: lock.keys, mode: lock.mode, count: outcome.reclaimed });
    }
    if (waitedMs > this.options.slowThresholdMs) this.logger.warn(`Waited ${Math.round(waitedMs)} ms for ${describeKeys(lock)}`);
    this.emit({ type: 'acquired', keys: lock.keys, mode: lock.mode, fencingToken: lock.fencingToken, waitedMs });
    return lock;
  }

  private blockedLocally(targets: readonly LockTarget[]): boolean {
    const now = performance.now();
    for (const target of targets) {
      for (const lock of this.localHolds.get(target.storedKey) ?? []) {
        // Past its lease deadline (not renewed: stalled, or fencing) a local lock may already be
        // reclaimable in the database: let the waiter ask instead of assuming it is blocked.
        if (!lock.live || now >= lock.leaseDeadline) continue;
        if (target.mode === 'write' || lock.modes[target.key] === 'write') return true;
      }
    }
    return false;
  }

  /** A lock is gone (renewal found it taken over, or its lease ran out unrenewed). */
  private lost(lock: HeldLock, error: LockLostError): void {
    if (lock.signal.aborted) return;
    this.forget(lock);
    lock.markLost(error);
    this.logger.warn(error.message);
    if (isInternal(lock)) return;
    this.stats.lost++;
    this.emit({ type: 'lost', keys: lock.keys, mode: lock.mode, fencingToken: lock.fencingToken, heldMs: performance.now() - lock.acquiredAt, error });
  }

  /** Drops a lock from local bookkeeping and wakes local waiters for its keys. */
  private forget(lock: HeldLock): void {
    this.watchdog.remove(lock);
    for (const target of lock.targets) {
      const set = this.localHolds.get(target.storedKey);
      if (!set) continue;
      if (set.has(lock) && isInternalTarget(target)) this.internalHeld--;
      set.delete(lock);
      if (set.size === 0) this.localHolds.delete(target.storedKey);
    }
    const woken = new Set<WaitQueue<HeldLock>>();
    for (const target of lock.targets) for (const queue of this.queuesByKey.get(target.storedKey) ?? []) woken.add(queue);
    for (const queue of woken) queue.wake();
  }
}

/** The library's own locks (the janitor's) emit no events and count in no user stats. */
function isInternal(lock: HeldLock): boolean {
  return lock.targets.some(isInternalTarget);
}

function describeKeys(lock: HeldLock): string {
  return `${lock.mode} lock on ${lock.keys.map((k) => `'${k}'`).join(', ')}`;
}
