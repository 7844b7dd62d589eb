import type { Logger } from '@nestjs/common';
import type { DbLockJanitorOptions } from '../db-lock.options.js';
import { LockTimeoutError } from '../errors/lock-timeout.error.js';
import type { HeldLock } from '../held-lock.js';
import type { LockEngine } from '../lock-engine.js';
import { JANITOR_LOCK_TARGET } from '../storage/internal-keys.js';
import { keyText } from '../storage/lock-store.js';
import {
  idleKeysStatement,
  pruneBatchStatement,
  REAP_SUMMARY_INDEX,
  reapStatement,
  RECLAIM_ROWS_INDEX,
  reclaimBatchStatement,
} from './janitor-sql.js';

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
  readonly batches: { readonly reclaim: number; readonly prune: number; readonly reap: number };
  readonly durationMs: number;
}

/** Durations past this are "keep for ever" (and would overflow the SQL interval arithmetic). */
const FOREVER_MS = 1e13;

/**
 * The cluster's clean-up job. Every `intervalMs` (±10% jitter) each node tries the janitor lock
 * once (`tryAcquire` semantics: no waiting); the node that gets it reclaims expired holders,
 * prunes old log rows and reaps idle key rows, each in batches of `batchSize` rows, then
 * releases. Its lock is renewed by the watchdog like any other, and the run stops between
 * batches if that lock is lost or the service shuts down.
 */
export class LockJanitor {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<JanitorReport> | undefined;
  private stopped = false;

  constructor(
    private readonly engine: LockEngine,
    private readonly settings: Readonly<Required<DbLockJanitorOptions>>,
    private readonly leaseMs: number,
    private readonly logger: Logger,
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

  /** One run now (or the one already in progress). Rejects only on database errors. */
  run(): Promise<JanitorReport> {
    if (!this.running) {
      const run = this.runOnce();
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
    const stats = this.engine.stats.janitor;
    const empty = { ran: false, complete: false, reclaimed: 0, pruned: 0, reapedKeys: 0, batches: { reclaim: 0, prune: 0, reap: 0 }, durationMs: 0 };
    if (this.stopped) return empty;
    let lock: HeldLock;
    try {
      lock = await this.engine.acquire({ targets: [JANITOR_LOCK_TARGET], mode: 'write', timeoutMs: 0, leaseMs: this.leaseMs });
    } catch (error) {
      if (!(error instanceof LockTimeoutError)) throw error;
      stats.skipped++;
      return { ...empty, durationMs: performance.now() - startedAt };
    }
    const work = { reclaimed: 0, pruned: 0, reapedKeys: 0, batches: { reclaim: 0, prune: 0, reap: 0 } };
    let complete = false;
    try {
      complete = await this.sweep(lock, work);
      stats.runs++;
    } catch (error) {
      stats.failures++;
      throw error;
    } finally {
      await lock.release().catch((e: unknown) => this.logger.warn(`Janitor could not release its lock: ${String(e)}`));
    }
    return { ran: true, complete, ...work, durationMs: performance.now() - startedAt };
  }

  /**
   * The work of one run, in batches; returns false if it stopped early. Protected so tests can
   * observe runs (record when each one starts and ends).
   */
  protected async sweep(
    lock: HeldLock,
    work: { reclaimed: number; pruned: number; reapedKeys: number; batches: { reclaim: number; prune: number; reap: number } },
  ): Promise<boolean> {
    const { batchSize, logRetentionMs, idleKeyMs } = this.settings;
    const proceed = (): boolean => !this.stopped && lock.live;
    const store = this.engine.store;
    const stats = this.engine.stats;

    // 1. Reclaim expired holders (EXPIRED fences them; their own renewal then reports the loss).
    for (;;) {
      if (!proceed()) return false;
      const results = await store.withRetries(() => store.pool.query<unknown[][]>(reclaimBatchStatement(batchSize)));
      work.batches.reclaim++;
      stats.janitor.batches++;
      const perKey = results[RECLAIM_ROWS_INDEX] as Record<string, unknown>[];
      const count = Number((results[1] as unknown as { affectedRows: number }).affectedRows);
      if (count > 0) {
        work.reclaimed += count;
        stats.reclaimed += count;
        stats.janitor.reclaimed += count;
        this.engine.emit({ type: 'reclaimed', keys: perKey.map((r) => keyText(r.lock_key)), mode: 'write', count });
      }
      if (count < batchSize) break;
    }

    // 2. Prune terminal log rows past the retention.
    if (logRetentionMs < FOREVER_MS) {
      for (;;) {
        if (!proceed()) return false;
        const result = await store.withRetries(() => store.pool.query<{ affectedRows: number }>(pruneBatchStatement(logRetentionMs, batchSize)));
        work.batches.prune++;
        stats.janitor.batches++;
        work.pruned += result.affectedRows;
        stats.janitor.pruned += result.affectedRows;
        if (result.affectedRows < batchSize) break;
      }
    }

    // 3. Reap idle key rows (the fencing floor keeps their tokens growing if they come back).
    if (idleKeyMs < FOREVER_MS) {
      for (;;) {
        if (!proceed()) return false;
        const candidates = await store.withRetries(() => store.pool.query<Record<string, unknown>[]>(idleKeysStatement(idleKeyMs, batchSize)));
        work.batches.reap++;
        stats.janitor.batches++;
        if (candidates.length === 0) break;
        const keys = candidates.map((r) => r.lock_key as Buffer);
        const results = await store.withRetries(() => store.pool.query<unknown[][]>(reapStatement(keys, idleKeyMs)));
        const reaped = Number((results[REAP_SUMMARY_INDEX] as Record<string, unknown>[])[0]!.reaped);
        work.reapedKeys += reaped;
        stats.janitor.reapedKeys += reaped;
        if (candidates.length < batchSize) break;
        // Every candidate was busy again: stop here rather than loop on the same rows.
        if (reaped === 0) break;
      }
    }
    return true;
  }
}
