import type { DataSource, QueryRunner } from 'typeorm';
import { FencedTransaction } from '../core/fenced-transaction.js';

/** What the watch reads of TypeORM's AfterQuery event (declared here: TypeORM 0.3 and 1.x type it differently). */
interface FailedQueryEvent {
  readonly queryRunner: QueryRunner;
  readonly success: boolean;
  readonly error?: unknown;
}

/**
 * Watches the statements of one DataSource (a TypeORM subscriber's after-query hook) for a failure
 * of a fenced transaction's own statement that rolled that whole transaction back (a deadlock), and
 * tells the transaction (FencedTransaction.workStatementFailed): work that catches such an error
 * and goes on must not write outside its lock, nor have its call reported as committed.
 * Installed whatever `escapedWrites` says; a statement that succeeded costs one property read.
 */
export class RollbackWatch {
  constructor(private readonly dataSource: DataSource) {}

  install(): void {
    this.dataSource.subscribers.push(this);
  }

  uninstall(): void {
    const index = this.dataSource.subscribers.indexOf(this);
    if (index >= 0) this.dataSource.subscribers.splice(index, 1);
  }

  afterQuery(event: FailedQueryEvent): void {
    if (event.success) return;
    const fence = FencedTransaction.over(this.dataSource);
    if (fence && fence.runner === event.queryRunner) fence.workStatementFailed(event.error);
  }
}
