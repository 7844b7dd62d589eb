import { LockLostError } from '../errors/lock-lost.error.js';
import { type HeldLock, signalMarginMs } from '../core/held-lock.js';
import type { ProcessLeaseStore } from '../store/lock-store.js';

/** Most row ids checked by one statement when the process row says some of its rows were ended. */
const ROWS_PER_CHECK = 5000;
/** After a failed renewal the next try comes this soon (or at the usual interval, if sooner): a short outage then costs one retry, not a whole interval of the lease's slack. */
export const RENEWAL_RETRY_MS = 1_000;

export interface LeaseWatchdogHooks {
  /** The lock is gone: abort its signal, forget it locally, count and report it. `giveBack`: its rows may still be live and must be ended. */
  lost(lock: HeldLock, error: LockLostError, giveBack: boolean): void;
  /** One renewal succeeded: `locks` leases renewed, the statement took `ms`. */
  renewed(locks: number, ms: number): void;
  renewalFailed(error: unknown, locks: number): void;
}

/**
 * Renews the process lease, which keeps every lock of this process alive: each tick (a third of
 * the shortest lease held, or renewIntervalMs) is one single-row write, whatever the number of
 * locks. The renewal reads back `ended_count`, which whoever ends one of our live rows increments;
 * only then are the rows themselves checked.
 *
 * Each lock's signal aborts at its local deadline (the send time of its last confirmed grant,
 * extend or renewal, plus its lease, minus a margin): never later than the database may count the
 * lease over, and without waiting for a late renewal. From then on the lock is lost to its holder
 * and its rows are ended so the key frees at once; so are locks held past maxHoldMs.
 *
 * Tests stop it through `running` (see test/support/frozen-watchdog.ts), never through a hook here.
 */
export class LeaseWatchdog {
  private readonly locks = new Set<HeldLock>();
  private renewTimer: NodeJS.Timeout | undefined;
  private deadlineTimer: NodeJS.Timeout | undefined;
  private deadlineAt = Infinity;
  private renewAt = Infinity;
  private ticking = false;
  private stopped = false;
  /** ended_count as last seen: a new process row starts at 0. */
  private endedCount = '0';
  /** performance.now() when the latest renewal was sent: the next one is due an interval after it, however long that one took. */
  private lastSentAt = -Infinity;
  /** The latest renewal failed: the next one is a retry (RENEWAL_RETRY_MS). */
  private retrying = false;

  constructor(
    private readonly store: ProcessLeaseStore,
    private readonly hooks: LeaseWatchdogHooks,
    private readonly settings: { readonly renewIntervalMs: number | undefined; readonly maxHoldMs: number },
  ) {}

  get size(): number {
    return this.locks.size;
  }

  add(lock: HeldLock): void {
    if (this.stopped) return;
    this.locks.add(lock);
    // O(1) per grant while the timers run: the new lock alone can bring either one forward. Also
    // called again after an extend, whose shorter lease may bring them forward.
    if (this.renewTimer && !this.ticking) this.armRenewal(this.renewalDueOf(lock));
    else this.scheduleRenewal();
    if (this.deadlineTimer) this.armDeadline(this.deadlineOf(lock));
    else this.scheduleDeadline();
  }

  remove(lock: HeldLock): void {
    // Timers stay: one that finds no lock lets itself lapse, and the next acquisition (often at once) reuses them.
    this.locks.delete(lock);
  }

  /** False while the process acts as if its event loop were stopped: no renewal, no deadline abort (a test's subclass overrides it). */
  protected running(): boolean {
    return true;
  }

  /** Timers again after `running()` turned true (a test's subclass calls it). */
  protected resume(): void {
    this.scheduleRenewal();
    this.scheduleDeadline();
  }

  /** Stops for good: no timer stays behind (shutdown). */
  stop(): void {
    this.stopped = true;
    this.locks.clear();
    this.clearTimers();
  }

  /** Runs one renewal now (ticks call it; tests and shutdown drills may too). */
  async tick(): Promise<void> {
    if (this.ticking || this.stopped) return;
    this.ticking = true;
    try {
      if (!this.running()) return;
      this.giveUpOverdue();
      if (this.locks.size > 0) await this.renew();
    } finally {
      this.ticking = false;
      this.renewTimer = undefined;
      if (this.locks.size > 0 && !this.stopped) this.scheduleRenewal();
      this.scheduleDeadline();
    }
  }

  private async renew(): Promise<void> {
    const sentAt = performance.now();
    this.lastSentAt = sentAt;
    const count = this.locks.size;
    let longest = 0;
    for (const lock of this.locks) longest = Math.max(longest, lock.localDeadline - sentAt);
    let answer: { endedCount: string; created?: boolean };
    try {
      // Bounded by the longest remaining lease (at least 1 s): a renewal that lands late still
      // renews every lock nobody took over; locks whose deadline passes meanwhile are aborted by
      // the deadline timer, not by this bound.
      answer = await this.store.renew(sentAt + Math.max(1000, longest));
    } catch (error) {
      this.retrying = true;
      this.hooks.renewalFailed(error, count);
      return;
    }
    this.retrying = false;
    for (const lock of this.locks) if (lock.live && sentAt > lock.leaseFrom) lock.leaseFrom = sentAt;
    this.hooks.renewed(count, performance.now() - sentAt);
    // A process row created anew (the janitor reaped it: this process held nothing live, or stalled
    // so long that its rows were reclaimed) counted nothing meanwhile: its rows are checked.
    // The count is taken as seen only once the check ran through: a check that failed is made again next time.
    if (answer.endedCount !== this.endedCount || answer.created) {
      if (await this.findEnded()) this.endedCount = answer.endedCount;
    }
  }

  /** Someone ended rows of this process: find whose, and tell those holders. False if a check failed (some rows unchecked). */
  private async findEnded(): Promise<boolean> {
    const byRow = new Map<string, HeldLock>();
    for (const lock of this.locks) for (const id of lock.rowIds) byRow.set(id, lock);
    const ids = [...byRow.keys()];
    let checked = true;
    for (let i = 0; i < ids.length; i += ROWS_PER_CHECK) {
      const ended = await this.store.endedAmong(ids.slice(i, i + ROWS_PER_CHECK)).catch(() => {
        checked = false;
        return new Set<string>();
      });
      for (const id of ended) {
        const lock = byRow.get(id);
        if (lock?.live && lock.fencesInProgress === 0)
          this.lose(lock, 'its log rows were ended by someone else (taken over or reclaimed after its lease ran out, or force-released)', false);
      }
    }
    return checked;
  }

  /** Locks past their local deadline, or held longer than maxHoldMs: their holders must stop now. */
  giveUpOverdue(): void {
    if (!this.running()) return;
    const now = performance.now();
    for (const lock of [...this.locks]) {
      if (!lock.live) {
        this.locks.delete(lock);
        continue;
      }
      if (lock.fencesInProgress > 0) continue; // a fenced commit is deciding in the database right now
      if (now - lock.grantedAt > this.settings.maxHoldMs) this.lose(lock, `held longer than maxHoldMs (${this.settings.maxHoldMs} ms)`, true);
      else if (now >= lock.localDeadline) this.lose(lock, 'its lease ran out before a renewal was confirmed', true);
    }
  }

  private lose(lock: HeldLock, reason: string, giveBack: boolean): void {
    this.locks.delete(lock);
    this.hooks.lost(lock, new LockLostError(lock.keys[0]!, lock.fencingToken, reason), giveBack);
  }

  private scheduleRenewal(): void {
    if (this.renewTimer || this.stopped || this.locks.size === 0) return;
    let due = Infinity;
    for (const lock of this.locks) due = Math.min(due, this.renewalDueOf(lock));
    this.armRenewal(due);
  }

  /**
   * When `lock` needs the next renewal: an interval after its lease was last confirmed, by its grant
   * or the previous renewal SENT (a slow renewal must not push the next one later, or the leases
   * would be left with less than two intervals of slack). A fresh grant is its own confirmation:
   * renewing right after it would only cost a timer and a wake-up per short hold, each finding
   * nothing left to renew.
   */
  private renewalDueOf(lock: HeldLock): number {
    // renewIntervalMs where two renewals fit before the lock gives itself up (its lease less the
    // signal margin): one may fail and the next still lands. Else a third of the lease.
    const configured = this.settings.renewIntervalMs;
    const fits = configured !== undefined && configured * 2 <= lock.leaseMs - signalMarginMs(lock.leaseMs);
    const interval = Math.min(fits ? configured : Math.max(10, Math.floor(lock.leaseMs / 3)), this.retrying ? RENEWAL_RETRY_MS : Infinity);
    return Math.max(lock.leaseFrom, this.lastSentAt) + interval;
  }

  /** The renewal timer due at `due`, unless one is due no later. */
  private armRenewal(due: number): void {
    if (this.stopped || (this.renewTimer && this.renewAt <= due)) return;
    if (this.renewTimer) clearTimeout(this.renewTimer);
    this.renewAt = due;
    this.renewTimer = setTimeout(() => void this.tick(), Math.max(1, Math.min(due - performance.now(), 2 ** 31 - 1)));
    this.renewTimer.unref();
  }

  /** One timer for the earliest local deadline (or maxHoldMs) among the held locks. */
  private scheduleDeadline(): void {
    if (this.stopped || this.locks.size === 0) return this.clearDeadline();
    let next = Infinity;
    for (const lock of this.locks) next = Math.min(next, this.deadlineOf(lock));
    this.armDeadline(next);
  }

  /** When `lock` must be given up unless renewed: its local deadline, or maxHoldMs after its grant. */
  private deadlineOf(lock: HeldLock): number {
    return Math.min(lock.localDeadline, lock.grantedAt + this.settings.maxHoldMs);
  }

  /** The deadline timer due at `next`, unless one is due no later: when it fires it looks again (re-arming one per acquisition costs every grant). */
  private armDeadline(next: number): void {
    if (this.deadlineTimer && this.deadlineAt <= next) return;
    this.clearDeadline();
    this.deadlineAt = next;
    this.deadlineTimer = setTimeout(
      () => {
        this.deadlineTimer = undefined;
        this.deadlineAt = Infinity;
        if (!this.running()) return;
        this.giveUpOverdue();
        this.scheduleDeadline();
      },
      Math.max(1, Math.min(Math.ceil(next - performance.now()), 2 ** 31 - 1)),
    );
    this.deadlineTimer.unref();
  }

  private clearDeadline(): void {
    if (this.deadlineTimer) clearTimeout(this.deadlineTimer);
    this.deadlineTimer = undefined;
    this.deadlineAt = Infinity;
  }

  private clearTimers(): void {
    if (this.renewTimer) clearTimeout(this.renewTimer);
    this.renewTimer = undefined;
    this.clearDeadline();
  }
}
