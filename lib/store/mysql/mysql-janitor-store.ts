import type { JanitorStore } from '../lock-store.js';
import {
  deleteRowLockRowsStatement,
  expiredCandidatesStatement,
  idleKeysStatement,
  lockIdleRowLockRowsStatement,
  pruneBatchPlan,
  pruneBoundaryStatement,
  reapDeletePlan,
  reapLockPlan,
  reapProcessesPlan,
  reclaimBatchPlan,
} from './janitor.sql.js';
import type { MysqlLockLog } from './mysql-lock-log.js';
import { runInSession } from './statement-plan.js';
import { rowsOf } from './sql.js';
import { ER_LOCK_WAIT_TIMEOUT, errnoOf } from './errno.js';
import { LockStatementError } from '../lock-statement.error.js';
import { claimsPresent } from './schema-check.js';
import { isNoWait } from './row-lock-session.js';
import { claimsPruneBatchPlan, claimsPruneEndPlan } from './claims-prune.sql.js';

/** The janitor's batches on MySQL/MariaDB, each retried through transient failures. */
export class MysqlJanitorStore implements JanitorStore {
  /** Where the last prune's boundary was found: rows below it were all granted before it. */
  private pruneFrom = '0';

  /** Tokens are claimed (see claims()). */
  private claimed = false;

  constructor(private readonly log: MysqlLockLog) {}

  /**
   * Whether tokens are claimed: known at start, and asked again while not, since AddTokenClaims may
   * run while this process lives. Its prune and reap must then keep the newest claims and lift key
   * rows that one-INSERT grants left behind, or a key's next token could go below one handed out.
   */
  private async claims(): Promise<boolean> {
    if (!this.claimed) this.claimed = this.log.schema.claims || (await claimsPresent(this.log.pool));
    return this.claimed;
  }

  async reclaimExpired(
    batchSize: number,
    afterId = '0',
  ): Promise<{ candidates: number; count: number; keys: string[]; lastId?: string; skipped?: number }> {
    const candidates = rowsOf(await this.query(expiredCandidatesStatement(batchSize, afterId))).map((r) => String(r.id));
    if (candidates.length === 0) return { candidates: 0, count: 0, keys: [] };
    const { keys, count, skipped } = await this.reclaimSkippingLocked(candidates);
    return { candidates: candidates.length, count, keys: [...new Set(keys)], lastId: candidates[candidates.length - 1], skipped };
  }

  /**
   * The batch in one statement; if a row lock held it past every retry (a holder stopped between its
   * fence and its COMMIT keeps its row locked), the rows one by one, those still locked skipped: one
   * stalled holder must not stop every janitor run from reclaiming the others.
   */
  private async reclaimSkippingLocked(candidates: readonly string[]): Promise<{ keys: string[]; count: number; skipped: number }> {
    try {
      return { ...(await this.retried(() => this.log.run(reclaimBatchPlan(candidates), 'janitor'))), skipped: 0 };
    } catch (error) {
      if (!lockWaitTimedOut(error)) throw error;
    }
    const reclaimed = { keys: [] as string[], count: 0, skipped: 0 };
    for (const id of candidates) {
      try {
        const one = await this.log.run(reclaimBatchPlan([id]), 'janitor');
        reclaimed.keys.push(...one.keys);
        reclaimed.count += one.count;
      } catch (error) {
        if (!lockWaitTimedOut(error)) throw error;
        reclaimed.skipped++;
      }
    }
    return reclaimed;
  }

  async prune(retentionMs: number, batchSize: number): Promise<number> {
    // Searched from the last boundary on, so each row is passed once by the search over all runs.
    const boundary = rowsOf(await this.query(pruneBoundaryStatement(retentionMs, this.pruneFrom)))[0];
    const below = boundary === undefined ? undefined : String(boundary.id);
    if (below !== undefined) this.pruneFrom = below;
    if (!(await this.claims())) return this.retried(() => this.log.run(pruneBatchPlan(retentionMs, batchSize, below), 'janitor'));
    return this.retried(() =>
      this.log.pool.session({ purpose: 'janitor' }, async (session) => {
        const batch = await runInSession(session, claimsPruneBatchPlan(retentionMs, batchSize, below), this.log.clustered);
        return runInSession(session, claimsPruneEndPlan(batch), this.log.clustered);
      }),
    );
  }

  async reapIdleKeys(idleMs: number, batchSize: number): Promise<{ candidates: number; reaped: number; floorBusy?: boolean }> {
    const claims = await this.claims();
    const candidates = rowsOf(await this.query(idleKeysStatement(idleMs, batchSize, claims))).map((r) => r.lock_key as Buffer);
    if (candidates.length === 0) return { candidates: 0, reaped: 0 };
    const reaped = await this.retried(() =>
      this.log.pool.session({ purpose: 'janitor' }, async (session) => {
        let locked;
        try {
          locked = await runInSession(session, reapLockPlan(candidates, idleMs, claims), this.log.clustered);
        } catch (error) {
          if (isNoWait(LockStatementError.from(error).driverError)) return undefined; // the floor is in use: reaped on a later run
          throw error;
        }
        return runInSession(session, reapDeletePlan(locked), this.log.clustered);
      }),
    );
    if (reaped === undefined) return { candidates: candidates.length, reaped: 0, floorBusy: true };
    await this.reapRowLockRows(candidates);
    return { candidates: candidates.length, reaped };
  }

  async reapProcesses(idleMs: number, batchSize: number): Promise<void> {
    await this.retried(() => this.log.run(reapProcessesPlan(idleMs, batchSize), 'janitor'));
  }

  /** Row-lock rows of reaped keys, skipping any a holder has locked right now. */
  private async reapRowLockRows(keys: readonly Buffer[]): Promise<void> {
    await this.retried(() =>
      this.log.pool.session({ purpose: 'janitor' }, async (session) => {
        await session.query('START TRANSACTION');
        const locked = rowsOf(await session.query(lockIdleRowLockRowsStatement(keys))).map((r) => r.lock_key as Buffer);
        if (locked.length > 0) await session.query(deleteRowLockRowsStatement(locked));
        await session.query('COMMIT');
      }),
    );
  }

  private query<T>(sql: string): Promise<T> {
    return this.retried(() => this.log.pool.query<T>(sql, { purpose: 'janitor' }));
  }

  private retried<T>(send: () => Promise<T>): Promise<T> {
    return this.log.withRetries('janitor', send);
  }
}

function lockWaitTimedOut(error: unknown): boolean {
  return errnoOf(LockStatementError.from(error).driverError) === ER_LOCK_WAIT_TIMEOUT;
}
