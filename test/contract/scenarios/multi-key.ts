import { setTimeout as sleep } from 'node:timers/promises';
import { DataSource } from 'typeorm';
import type { LockKeySpec } from '../../../lib/index.js';
import type { WorkerContext } from '../../support/lock-worker.js';
import { runSql } from '../../support/portable-sql.js';

const ENTER = {
  write:
    'UPDATE rw_probe SET violations = violations + CASE WHEN readers <> 0 OR writers <> 0 THEN 1 ELSE 0 END, writer_entries = writer_entries + 1, writers = writers + 1 WHERE id = ?',
  read: 'UPDATE rw_probe SET violations = violations + CASE WHEN writers <> 0 THEN 1 ELSE 0 END, max_readers = GREATEST(max_readers, readers + 1), reader_sum = reader_sum + readers + 1, reader_entries = reader_entries + 1, readers = readers + 1 WHERE id = ?',
} as const;
const LEAVE = {
  write: 'UPDATE rw_probe SET violations = violations + CASE WHEN readers <> 0 OR writers <> 1 THEN 1 ELSE 0 END, writers = writers - 1 WHERE id = ?',
  read: 'UPDATE rw_probe SET violations = violations + CASE WHEN writers <> 0 OR readers < 1 THEN 1 ELSE 0 END, readers = readers - 1 WHERE id = ?',
} as const;

export interface MultiLoopArgs {
  /** Key sets to cycle through, each in the order the caller writes it (e.g. [A, B] in one process, [B, A] in the other). */
  sets: LockKeySpec[][];
  iterations: number;
  /** Probe row id per key: each key's sections are checked on its own row. */
  probeIds: Record<string, number>;
  holdMs: number;
  timeoutMs: number;
}

/**
 * Takes each key set in turn, enters every key's probe row in its mode, holds, leaves. Counts
 * typed timeouts; any other error fails the run. Returns the counts and the handle's key order.
 */
export async function multiLoop(
  ctx: WorkerContext<MultiLoopArgs>,
): Promise<{ done: number; timeouts: number; errors: string[]; keyOrders: string[][] }> {
  const { sets, iterations, probeIds, holdMs, timeoutMs } = ctx.args;
  const db = ctx.app.get(DataSource);
  let done = 0;
  let timeouts = 0;
  const errors: string[] = [];
  const keyOrders = new Set<string>();
  for (let i = 0; i < iterations; i++) {
    const set = sets[i % sets.length]!;
    try {
      await ctx.locks.withLock(
        set,
        async (lock) => {
          keyOrders.add(JSON.stringify(lock.keys));
          for (const key of lock.keys) await runSql(db, ENTER[lock.modes[key]!], [probeIds[key]]);
          if (holdMs > 0) await sleep(holdMs);
          for (const key of lock.keys) await runSql(db, LEAVE[lock.modes[key]!], [probeIds[key]]);
        },
        { timeoutMs },
      );
      done++;
    } catch (error) {
      if ((error as Error).name === 'LockTimeoutError') timeouts++;
      else errors.push(`${(error as Error).name}: ${(error as Error).message}`);
    }
  }
  return { done, timeouts, errors, keyOrders: [...keyOrders].map((k) => JSON.parse(k) as string[]) };
}
