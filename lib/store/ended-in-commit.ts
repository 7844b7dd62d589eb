import type { QueryRunner } from 'typeorm';
import type { KnownFreeKeys } from './known-free-keys.js';
import type { FenceStore, SessionTransactions } from './lock-store.js';

/**
 * The part of a store's fence that every store writes alike: BEGIN and COMMIT on its session
 * transactions, and `endInCommit` (the store's UPDATE, `endRows`) noting the log rows it ended.
 * They are durably ended only once the commit succeeds, and `knownFree` learns of them then (a
 * rollback leaves them live, and the next BEGIN on the runner forgets them).
 */
export function fenceEndingInCommit(
  transactions: SessionTransactions,
  knownFree: KnownFreeKeys,
  endRows: (runner: QueryRunner, rowIds: readonly string[], owner: string) => Promise<number>,
): Pick<FenceStore, 'begin' | 'commit' | 'endInCommit'> {
  const ending = new WeakMap<QueryRunner, string[]>();
  return {
    begin: (runner, isolationLevel) => {
      ending.delete(runner);
      return transactions.begin(runner, isolationLevel);
    },
    commit: async (runner) => {
      await transactions.commit(runner);
      const ended = ending.get(runner);
      ending.delete(runner);
      if (ended) knownFree.ended(ended, ended.length);
    },
    endInCommit: async (runner, rowIds, owner) => {
      const ended = await endRows(runner, rowIds, owner);
      // All of them or none counts: a lock ends whole.
      if (ended === rowIds.length) ending.set(runner, [...(ending.get(runner) ?? []), ...rowIds]);
      return ended;
    },
  };
}
