import type { QueryRunner } from 'typeorm';
import type { KnownFreeKeys } from './known-free-keys.js';

/**
 * The log rows a fenced business transaction ended in its commit, noted per transaction: they are
 * durably ended only once that commit succeeds, and `knownFree` learns of them then (a rollback
 * leaves them live, and the next BEGIN on the runner forgets them).
 */
export class EndedInCommit {
  private readonly byRunner = new WeakMap<QueryRunner, string[]>();

  constructor(private readonly knownFree: KnownFreeKeys) {}

  begun(runner: QueryRunner): void {
    this.byRunner.delete(runner);
  }

  /** `ended` of `rowIds` were ended in the transaction (all or nothing counts); returns `ended`. */
  noted(runner: QueryRunner, rowIds: readonly string[], ended: number): number {
    if (ended === rowIds.length) this.byRunner.set(runner, [...(this.byRunner.get(runner) ?? []), ...rowIds]);
    return ended;
  }

  committed(runner: QueryRunner): void {
    const ended = this.byRunner.get(runner);
    this.byRunner.delete(runner);
    if (ended) this.knownFree.ended(ended, ended.length);
  }
}
