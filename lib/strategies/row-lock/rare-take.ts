import type { QueryRunner } from 'typeorm';
import type { LockTarget } from '../../core/lock-key.js';
import type { LockLogStore, RowLockStore, RowLockTake } from '../../store/lock-store.js';

/** What the rare path needs of the try it continues. */
export interface RareTake {
  readonly targets: readonly LockTarget[];
  readonly deadline: number;
  readonly isolationLevel?: string;
  readonly acquisitionId: string;
  /** The take opened the transaction itself (it may roll it back and start again), or runs in a joined one. */
  readonly ownTransaction: boolean;
}

/** Whether an answer needs the rare path: its key rows missing, or a lease holder possibly live. */
export function needsRarePath(result: RowLockTake): result is Exclude<RowLockTake, { taken: true }> {
  return !result.taken && (result.why === 'check-log' || result.why === 'missing-key-rows');
}

/**
 * The rare paths of a row-lock take, after a first answer that did not take the keys: their rows
 * missing (first use, or reaped), or a lease holder possibly live (the log must be read first).
 * Answers the take as it finally stands: taken, busy, or not taken after three rounds of
 * missing rows.
 */
export async function takeRarely(
  store: RowLockStore,
  log: LockLogStore,
  runner: QueryRunner,
  take: RareTake,
  first: RowLockTake,
): Promise<RowLockTake> {
  let result = first;
  for (let round = 0; needsRarePath(result); round++) {
    if (result.why === 'missing-key-rows') {
      if (round > 2) return result;
      const failed = await createKeyRows(store, log, runner, take);
      if (failed) return failed;
    } else if (take.ownTransaction && take.targets.length > 1) {
      // Rows a partial UPDATE bumped are rolled back first, so committed tokens never skip.
      await restart(store, runner, take);
    }
    result = await store.takeChecked(runner, take.targets, take.deadline, take.acquisitionId);
  }
  return result;
}

/**
 * First use of a key (or reaped). Its own transaction: the row is created in its own committed
 * statement on the library's pool, after a rollback that drops any gap lock of ours the insert
 * would wait for. A joined transaction cannot be rolled back: the row is created inside it, and a
 * failure there is answered as a take's (busy, or the transaction rolled back by a deadlock).
 * Either way within the caller's budget: another transaction's gap lock may hold the insert.
 */
async function createKeyRows(store: RowLockStore, log: LockLogStore, runner: QueryRunner, take: RareTake): Promise<RowLockTake | undefined> {
  const keys = take.targets.map((t) => t.bytes);
  if (!take.ownTransaction) return store.createKeyRowsIn(runner, keys, take.deadline);
  await restart(store, runner, take, () => log.createKeyRows(keys, Number.isFinite(take.deadline) ? take.deadline : undefined));
  return undefined;
}

/** A new transaction in place of the open one (its bumps and locks rolled back); `between` runs outside any. */
async function restart(store: RowLockStore, runner: QueryRunner, take: RareTake, between?: () => Promise<void>): Promise<void> {
  await runner.rollbackTransaction();
  await between?.();
  await store.begin(runner, take.isolationLevel);
}
