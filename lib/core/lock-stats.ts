/** Summary of a series of durations, in ms. Percentiles over the latest 1024 samples. */
export interface DurationSummary {
  /** Durations recorded since start. */
  readonly count: number;
  /** Mean of all of them, in ms. */
  readonly meanMs: number;
  /** Longest, in ms. */
  readonly maxMs: number;
  /** Median of the latest 1024, in ms. */
  readonly p50Ms: number;
  /** 99th percentile of the latest 1024, in ms. */
  readonly p99Ms: number;
}

/** What `LockService.stats()` returns: counts since start, and the current state. */
export interface LockStatsSnapshot {
  /** Locks granted (reentrant acquisitions not included). */
  readonly acquired: number;
  /** Acquisitions answered by a lock the call chain already held (no round trip). */
  readonly reentrant: number;
  /** Locks given back. */
  readonly released: number;
  /** Waits that ran out (LockTimeoutError, or tryAcquire returning null). */
  readonly timedOut: number;
  /** Decorated calls skipped because the lock was busy (onLocked: 'skip'). */
  readonly skipped: number;
  /** Held locks lost (taken over, reclaimed, force-released, maxHoldMs, shutdown). */
  readonly lost: number;
  /** Expired holders of other processes this process set EXPIRED (takeovers and janitor). */
  readonly reclaimed: number;
  /** Renewal statements sent (one per tick per process, however many locks). */
  readonly renewals: number;
  /** Lock leases renewed by those statements. */
  readonly renewedLocks: number;
  /** Renewal statements that failed (retried while the leases last). */
  readonly renewalFailures: number;
  /** Time per renewal statement (one per tick, covering every held lock). */
  readonly renewal: DurationSummary;
  /** Holders this process evicted with `forceRelease()`. */
  readonly forceReleased: number;
  /** What this node's janitor did (see JanitorStats). */
  readonly janitor: JanitorStats;
  /** Locks this process holds now. */
  readonly held: number;
  /** Callers of this process waiting now. */
  readonly waiting: number;
  /** Round trips the library sent to the database on its own pool, all purposes together. */
  readonly roundTrips: number;
  /**
   * The same round trips by purpose: `locks` (grants, releases, extends, doorbells), `renewals`
   * (the watchdog), `janitor`, `admin` (inspect, listLocks, forceRelease, bootstrap checks).
   * Statements the row-lock strategy sends on the app's DataSource connections are not counted.
   */
  readonly roundTripsBy: Readonly<Record<'locks' | 'renewals' | 'janitor' | 'admin', number>>;
  /** Time callers waited before a grant, in ms. */
  readonly wait: DurationSummary;
  /** Time locks were held, in ms. */
  readonly hold: DurationSummary;
}

/** Janitor work of this node since start. `reclaimed` is also counted in the top-level `reclaimed`. */
export interface JanitorStats {
  /** Runs that got the cluster-wide janitor lock and did their work. */
  readonly runs: number;
  /** Runs skipped because another node's janitor held the lock. */
  readonly skipped: number;
  /** Runs that stopped on an error. */
  readonly failures: number;
  /** Expired live log rows set to EXPIRED. */
  readonly reclaimed: number;
  /** Terminal log rows deleted (older than logRetentionMs). */
  readonly pruned: number;
  /** Idle lock-table rows deleted. */
  readonly reapedKeys: number;
  /** Statements sent by the janitor's batches. */
  readonly batches: number;
}

const WINDOW = 1024;

class DurationSeries {
  private count = 0;
  private total = 0;
  private max = 0;
  private readonly recent: number[] = [];
  private next = 0;

  add(ms: number): void {
    this.count++;
    this.total += ms;
    if (ms > this.max) this.max = ms;
    if (this.recent.length < WINDOW) this.recent.push(ms);
    else this.recent[this.next] = ms;
    this.next = (this.next + 1) % WINDOW;
  }

  summary(): DurationSummary {
    const sorted = [...this.recent].sort((a, b) => a - b);
    const at = (q: number): number => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]! : 0);
    return {
      count: this.count,
      meanMs: this.count ? this.total / this.count : 0,
      maxMs: this.max,
      p50Ms: at(0.5),
      p99Ms: at(0.99),
    };
  }
}

/** Counters behind `stats()`. Plain numbers: cheap enough to update on every lock. Only LockObserver writes them. */
export class LockStats {
  acquired = 0;
  reentrant = 0;
  released = 0;
  timedOut = 0;
  skipped = 0;
  lost = 0;
  reclaimed = 0;
  renewals = 0;
  renewedLocks = 0;
  renewalFailures = 0;
  forceReleased = 0;
  readonly janitor = { runs: 0, skipped: 0, failures: 0, reclaimed: 0, pruned: 0, reapedKeys: 0, batches: 0 };
  readonly renewal = new DurationSeries();
  readonly wait = new DurationSeries();
  readonly hold = new DurationSeries();

  snapshot(current: Pick<LockStatsSnapshot, 'held' | 'waiting' | 'roundTrips' | 'roundTripsBy'>): LockStatsSnapshot {
    return {
      acquired: this.acquired,
      reentrant: this.reentrant,
      released: this.released,
      timedOut: this.timedOut,
      skipped: this.skipped,
      lost: this.lost,
      reclaimed: this.reclaimed,
      renewals: this.renewals,
      renewedLocks: this.renewedLocks,
      renewalFailures: this.renewalFailures,
      renewal: this.renewal.summary(),
      forceReleased: this.forceReleased,
      janitor: { ...this.janitor },
      ...current,
      wait: this.wait.summary(),
      hold: this.hold.summary(),
    };
  }
}
