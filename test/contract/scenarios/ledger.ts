import { setTimeout as sleep } from 'node:timers/promises';
import type { WorkerContext } from '../../support/lock-worker.js';
import { runSql } from '../../support/portable-sql.js';

export interface LedgerArgs {
  key: string;
  who: string;
  timeoutMs?: number;
  /** Pause inside the locked work between its two writes (the test SIGSTOPs the process in it). */
  pauseMs?: number;
}

export interface LedgerResult {
  fencingToken: number;
  signalAborted: boolean;
}

/**
 * Its SQL runs on MySQL and PostgreSQL (portable-sql.ts). One row-lock hold that writes two ledger rows in its transaction (through `lockService.manager`),
 * emitting 'acquired' between them, and pausing there for `pauseMs`.
 */
export async function writeTwice(ctx: WorkerContext<LedgerArgs>): Promise<LedgerResult> {
  const { key, who, pauseMs = 0, timeoutMs } = ctx.args;
  let result: LedgerResult | undefined;
  await ctx.locks.runLocked(
    key,
    async () => {
      const lock = ctx.locks.currentLock!;
      const manager = ctx.locks.manager;
      await runSql(manager, 'INSERT INTO ledger (who, step, token) VALUES (?, 1, ?)', [who, lock.fencingToken]);
      ctx.emit('acquired', { fencingToken: lock.fencingToken });
      if (pauseMs > 0) await sleep(pauseMs);
      await runSql(manager, 'INSERT INTO ledger (who, step, token) VALUES (?, 2, ?)', [who, lock.fencingToken]);
      result = { fencingToken: lock.fencingToken, signalAborted: lock.signal.aborted };
    },
    { strategy: 'row-lock', timeoutMs },
  );
  return result!;
}
