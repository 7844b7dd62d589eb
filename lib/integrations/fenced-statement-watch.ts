import type { DataSource, QueryRunner } from 'typeorm';
import { FencedTransaction } from '../core/fenced-transaction.js';
import { DbLockError } from '../errors/db-lock.error.js';

/** What the watch reads of TypeORM's BeforeQuery/AfterQuery events (declared here: TypeORM 0.3 and 1.x type them differently). */
interface QueryEvent {
  readonly query: string;
  readonly queryRunner: QueryRunner;
}
interface FailedQueryEvent extends QueryEvent {
  readonly success: boolean;
  readonly error?: unknown;
}

const AFTER_END =
  'A statement of locked work was sent after its fenced transaction began to end (its COMMIT or ROLLBACK was already on ' +
  'the wire): it would have run on its own, outside the transaction and every lock, so it was refused. Await every ' +
  'statement of the locked work (a Promise.all that failed fast leaves its other branches running) before the method returns.';

/**
 * Watches the statements a fenced transaction's work sends through TypeORM on that transaction's
 * connection (a subscriber's query hooks on one DataSource), for the two ways such a statement
 * could commit outside every lock:
 * - sent once the transaction is ending (a sibling of a Promise.all that failed fast, a task not
 *   awaited): queued behind COMMIT or ROLLBACK it would run in autocommit, so it is refused;
 * - a failure that rolled the whole transaction back (a deadlock): the transaction is told
 *   (FencedTransaction.workStatementFailed), as work that catches the error and goes on must not
 *   write outside its lock, nor have its call reported as committed.
 * Installed whatever `escapedWrites` says; a statement outside fenced work costs one context lookup.
 */
export class FencedStatementWatch {
  constructor(private readonly dataSource: DataSource) {}

  install(): void {
    this.dataSource.subscribers.push(this);
  }

  uninstall(): void {
    const index = this.dataSource.subscribers.indexOf(this);
    if (index >= 0) this.dataSource.subscribers.splice(index, 1);
  }

  /** Throws (synchronously: TypeORM then refuses the statement) for a statement sent on an ending fenced transaction. */
  beforeQuery(event: QueryEvent): void {
    if (FencedTransaction.onRunner(event.queryRunner)?.refuses(event.query)) throw new DbLockError(AFTER_END);
  }

  afterQuery(event: FailedQueryEvent): void {
    if (event.success) return;
    const fence = FencedTransaction.over(this.dataSource);
    if (fence && fence.runner === event.queryRunner) fence.workStatementFailed(event.error);
  }
}
