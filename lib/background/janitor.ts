import type { Logger } from '@nestjs/common';
import type { DbLockJanitorOptions } from '../db-lock.options.js';
import type { HeldLock } from '../core/held-lock.js';
import type { LockObserver } from '../core/lock-observer.js';
import type { LockRuntime } from '../core/lock-runtime.js';
import { LockTimeoutError } from '../errors/lock-timeout.error.js';
import { JANITOR_LOCK_TARGET } from '../core/internal-keys.js';
import type { JanitorStore } from '../store/lock-store.js';
import type { LockStrategyName } from '../strategies/lock-strategy-name.js';
import { toTypedError } from '../errors/to-typed-error.js';

/** What one janitor run did. */
export interface JanitorReport {
  /** False when another node's janitor held the cluster-wide janitor lock (nothing was done). */
  readonly ran: boolean;
  /** False when the run stopped early (shutdown, lost janitor lock, error); the next run continues. */
  readonly complete: boolean;
  /** Expired live log rows set to EXPIRED. */
  readonly reclaimed: number;
  /** Terminal log rows older than logRetentionMs deleted. */
  readonly pruned: number;
  /** Idle lock-table rows deleted. */
  readonly reapedKeys: number;
  /** Statements sent per phase (each touches at most batchSize rows). */
  readonly batches: {
    /** Statements that set expired rows EXPIRED. */
    readonly reclaim: number;
    /** Statements that deleted old ended rows. */
    readonly prune: number;
    /** Statements that deleted idle key rows. */
    readonly reap: number;
  };
  /** How long the run took, in ms. */
  readonly durationMs: number;
}

type Work = { reclaimed: number; pruned: number; reapedKeys: number; batches: { reclaim: number; prune: number; reap: number } };

/** Durations past this are "keep for ever" (and would overflow the SQL interval arithmetic). */
const FOREVER_MS = 1e13;

/**
 * The cluster's clean-up job. Every `intervalMs` (±10% jitter) each node tries the janitor lock
 * once (no waiting); the node that gets it reclaims expired holders, prunes old log rows, reaps
 * idle key rows and the process-lease rows of processes long gone, each in batches of `batchSize` rows,
 * then releases. Its lock is renewed like any other, and the run stops between batches if that
 * lock is lost or the service shuts down.
 */
export class LockJanitor {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<JanitorReport> | undefined;
  private stopped = false;

  constructor(
    private readonly runtime: LockRuntime,
    private readonly store: JanitorStore,
    private readonly observer: LockObserver,
    private readonly settings: Readonly<Required<DbLockJanitorOptions>>,
    private readonly leaseMs: number,
    private readonly logger: Logger,
    /** How the one-at-a-time lock is taken: a lease where the store serves it. */
    private readonly lockStrategy: LockStrategyName = 'lease',
  ) {}

  /** Starts the periodic runs (first one after about one interval). */
  start(): void {
    if (this.stopped || this.timer) return;
    this.schedule();
  }

  /** Stops the timer and waits for a run in progress to stop at its next batch boundary. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    await this.running?.catch(() => undefined);
  }

  /** One run now (or the one already in progress). Rejects only on database errors, typed (DbLockError). */
  run(): Promise<JanitorReport> {
    if (!this.running) {
      const run = this.runOnce().catch((error: unknown) => {
        throw toTypedError(error, 'The janitor run failed');
      });
      this.running = run;
      const clear = (): void => {
        if (this.running === run) this.running = undefined;
      };
      run.then(clear, clear);
    }
    return this.running;
  }

  private schedule(): void {
    const delay = Math.max(1, Math.round(this.settings.intervalMs * (0.9 + 0.2 * Math.random())));
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.run()
        .catch((error: unknown) => this.logger.warn(`Janitor run failed, retrying next interval: ${String(error)}`))
        .finally(() => {
          if (!this.stopped) this.schedule();
        });
    }, delay);
    this.timer.unref();
  }

  private async runOnce(): Promise<JanitorReport> {
    const startedAt = performance.now();
    const empty = { ran: false, complete: false, reclaimed: 0, pruned: 0, reapedKeys: 0, batches: { reclaim: 0, prune: 0, reap: 0 }, durationMs: 0 };
    if (this.stopped) return empty;
    let lock: HeldLock;
    try {
      lock = await this.runtime.acquire({
        targets: [JANITOR_LOCK_TARGET],
        mode: 'write',
        strategy: this.lockStrategy,
        timeoutMs: 0,
        maxAttempts: 1,
        leaseMs: this.leaseMs,
        internal: true,
      });
    } catch (error) {
      if (!(error instanceof LockTimeoutError)) throw error;
      this.observer.janitorSkipped();
      return { ...empty, durationMs: performance.now() - startedAt };
    }
    const work: Work = { reclaimed: 0, pruned: 0, reapedKeys: 0, batches: { reclaim: 0, prune: 0, reap: 0 } };
    let complete = false;
    try {
      complete = await this.sweep(lock, work);
      this.observer.janitorFinished(false);
    } catch (error) {
      this.observer.janitorFinished(true);
      throw error;
    } finally {
      await lock.release().catch((e: unknown) => this.logger.warn(`Janitor could not release its lock: ${String(e)}`));
    }
    return { ran: true, complete, ...work, durationMs: performance.now() - startedAt };
  }

  /** The work of one run, in batches; returns false if it stopped early or skipped expired rows someone keeps locked. Protected so tests can observe runs. */
  protected async sweep(lock: HeldLock, work: Work): Promise<boolean> {
    const { batchSize, logRetentionMs, idleKeyMs } = this.settings;
    const proceed = (): boolean => !this.stopped && lock.live;
    // 1. Reclaim expired holders (EXPIRED fences them; their own renewal then reports the loss). Batches go
    //    on past the last candidate: rows a stalled holder keeps locked are skipped, not met again, and the
    //    run is not complete while any was.
    let skipped = false;
    for (let after: string | undefined; ;) {
      if (!proceed()) return false;
      const { candidates, count, keys, lastId, skipped: left } = await this.store.reclaimExpired(batchSize, after);
      work.batches.reclaim++;
      work.reclaimed += count;
      if (left) skipped = true;
      this.observer.janitorBatch(candidates === 0 ? {} : { reclaimed: count, reclaimedKeys: keys });
      if (candidates < batchSize || lastId === undefined) break;
      after = lastId;
    }
    // 2. Prune ended log rows past the retention.
    if (logRetentionMs < FOREVER_MS) {
      for (;;) {
        if (!proceed()) return false;
        const pruned = await this.store.prune(logRetentionMs, batchSize);
        work.batches.prune++;
        work.pruned += pruned;
        this.observer.janitorBatch({ pruned });
        if (pruned < batchSize) break;
      }
    }
    // 3. Reap idle key rows (the fencing floor keeps their tokens growing if they come back) and
    //    the process-lease rows of processes long gone.
    if (idleKeyMs < FOREVER_MS) {
      for (;;) {
        if (!proceed()) return false;
        const { candidates, reaped, floorBusy } = await this.store.reapIdleKeys(idleKeyMs, batchSize);
        work.batches.reap++;
        work.reapedKeys += reaped;
        this.observer.janitorBatch(candidates === 0 ? {} : { reapedKeys: reaped });
        if (floorBusy) skipped = true;
        if (candidates < batchSize || reaped === 0) break;
      }
      if (proceed()) await this.store.reapProcesses(Math.max(idleKeyMs, 3_600_000), batchSize);
    }
    return !skipped;
  }
}
