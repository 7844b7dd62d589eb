import type { Logger } from '@nestjs/common';
import type { DataSource, QueryRunner } from 'typeorm';
import { FencedTransaction } from '../core/fenced-transaction.js';
import { EscapedWriteError } from '../errors/escaped-write.error.js';
import { type EscapedLockWait, escapedLockWaitOf } from '../store/escaped-lock-wait.js';
import { callSite } from './call-site.js';
import { isLibraryStatement, readsRows, shortStatement, takesRowLocks } from './statement-kind.js';

/**
 * What the guard reads of TypeORM's BeforeQuery/AfterQuery events. Declared here rather than
 * imported: TypeORM 0.3 and 1.x type those events differently (generic or not).
 */
interface QueryHookEvent {
  readonly query: string;
  readonly queryRunner: QueryRunner;
}
interface AfterQueryHookEvent extends QueryHookEvent {
  readonly success: boolean;
  readonly error?: unknown;
}

/** An escaped write whose lock wait is bounded while it runs. */
interface Bounded {
  readonly fence: FencedTransaction;
  readonly query: string;
  readonly statement: string;
  readonly site: string | undefined;
}

/**
 * The bounded escaped writes of one connection (a runner), in the order sent. The bound is set by
 * the first and restored after the last: writes sent at once on one connection share it, and each
 * saving and restoring the session value on its own would restore another's bound.
 */
interface BoundedSession {
  readonly writes: Bounded[];
  /** Forgets the session and gives the runner its own release back (the wrapped release restores the bound first, in case a bounded write never ran: refused by another hook before it was sent). */
  readonly unhook: () => void;
}

/** A driver connection under TypeORM's runner (the callback API, which mysql2 and pg both have). */
type RawConnection = { query(sql: string, callback: (error: unknown) => void): unknown };

/** Warnings remembered per service: a bound, so an app generating call sites cannot grow it forever. */
const MAX_WARNED_SITES = 1000;

/**
 * Watches every statement of one DataSource (a TypeORM subscriber's query hooks) for writes sent,
 * while the async call chain has an open fenced transaction on that DataSource, on a connection
 * other than the fenced one: an `@InjectRepository` repository, `dataSource.query`, a REQUIRES_NEW
 * transaction. Such a write commits even if the fence rolls back, and if it touches a row the
 * fenced transaction wrote, it waits for that transaction's row locks, which only the end of the
 * call releases: a self-deadlock, silent until the server's lock wait bound (MySQL's
 * innodb_lock_wait_timeout, 50 s by default; PostgreSQL's lock_timeout, none by default).
 *
 * 'error': the write is refused before it is sent (EscapedWriteError). 'warn': one warning per
 * call site; and when the fenced transaction already holds row locks, the write's lock wait is
 * bounded on the server (its session's lock wait setting, restored right after; see EscapedLockWait): if it
 * times out, the fenced call fails with EscapedWriteError explaining the self-deadlock.
 */
export class EscapedWriteGuard {
  /** Fenced transactions that sent a row-locking statement of their own (noted then: nothing is set up per call). */
  private readonly locking = new WeakSet<FencedTransaction>();
  private readonly bounded = new WeakMap<QueryRunner, BoundedSession>();
  private readonly warned = new Set<string>();
  private readonly lockWait: EscapedLockWait;

  constructor(
    private readonly dataSource: DataSource,
    private readonly dataSourceName: string,
    private readonly mode: 'warn' | 'error',
    private readonly logger: Logger,
    /** One sentence: how to write inside the fence in this app. */
    private readonly fix: string,
  ) {
    this.lockWait = escapedLockWaitOf(String(dataSource.options.type));
  }

  install(): void {
    this.dataSource.subscribers.push(this);
  }

  uninstall(): void {
    const index = this.dataSource.subscribers.indexOf(this);
    if (index >= 0) this.dataSource.subscribers.splice(index, 1);
  }

  /** Called by TypeORM before every statement of the DataSource, in the caller's async context. Throws (synchronously) to refuse it. */
  beforeQuery(event: QueryHookEvent): Promise<void> | void {
    const fence = FencedTransaction.over(this.dataSource);
    if (!fence) return;
    const sql = event.query;
    if (typeof sql !== 'string') return;
    if (event.queryRunner === fence.runner) {
      if (takesRowLocks(sql) || (fence.readsLockRows && readsRows(sql))) this.locking.add(fence);
      return;
    }
    if (!takesRowLocks(sql)) return;
    if (isLibraryStatement(sql)) return;
    const site = callSite();
    const statement = shortStatement(sql);
    if (this.mode === 'error') throw new EscapedWriteError('escaped', this.dataSourceName, statement, site, this.fix);
    this.warnOnce(site, statement);
    if (this.locking.has(fence)) return this.bound(event.queryRunner, { fence, query: sql, statement, site });
  }

  /** Called by TypeORM after every statement: ends the bound of a bounded one and records its timeout. Never rejects. */
  afterQuery(event: AfterQueryHookEvent): Promise<void> | void {
    const session = this.bounded.get(event.queryRunner);
    if (!session) return;
    const index = session.writes.findIndex((write) => write.query === event.query);
    if (index < 0) return;
    const [write] = session.writes.splice(index, 1);
    if (!event.success && this.lockWait.timedOut(event.error)) {
      // The fenced call fails with EscapedWriteError explaining the self-deadlock, its own failure kept as cause.
      const { statement, site } = write!;
      write!.fence.explainWorkFailure = (error) =>
        error instanceof EscapedWriteError
          ? error
          : new EscapedWriteError('lock-wait', this.dataSourceName, statement, site, this.fix, { cause: error });
    }
    if (session.writes.length > 0) return;
    return this.restore(event.queryRunner, session);
  }

  /** Sets the session's lock wait bound before the statement (queued ahead of it on its connection) unless a write sent with it did. Never rejects. */
  private bound(runner: QueryRunner, write: Bounded): Promise<void> | void {
    const session = this.bounded.get(runner);
    if (session) return void session.writes.push(write);
    const release = runner.release;
    const opened: BoundedSession = {
      writes: [write],
      unhook: () => {
        runner.release = release;
        this.bounded.delete(runner);
      },
    };
    // Sent before TypeORM hands the connection to anyone else: the driver runs a connection's commands in order.
    runner.release = () =>
      this.bounded.get(runner) === opened ? this.restore(runner, opened).then(() => release.call(runner)) : release.call(runner);
    this.bounded.set(runner, opened);
    return send(runner, this.lockWait.bound).then(
      () => undefined,
      () => opened.unhook(), // not bounded: nothing to restore, and a timeout would not be ours to explain
    );
  }

  /** The session's own lock wait back, once no bounded write is left on it. Never rejects. */
  private restore(runner: QueryRunner, session: BoundedSession): Promise<void> {
    session.unhook();
    return send(runner, this.lockWait.restore).then(
      () => undefined,
      (error: unknown) => {
        if (!this.lockWait.restoredByRollback(error))
          this.logger.warn(`Could not restore ${this.lockWait.setting} after a write outside a fenced transaction: ${String(error)}`);
      },
    );
  }

  private warnOnce(site: string | undefined, statement: string): void {
    const key = site ?? statement;
    if (this.warned.has(key) || this.warned.size >= MAX_WARNED_SITES) return;
    this.warned.add(key);
    this.logger.warn(
      `Write outside the fenced transaction${site ? ` at ${site}` : ''}: "${statement}" ran on another connection of ` +
        `DataSource '${this.dataSourceName}' while this call's fenced transaction was open. It commits even if the fence ` +
        `rolls back, and it waits for the fenced transaction's own row locks if it touches the same rows. ${this.fix} ` +
        `(Logged once per call site; escapedWrites: 'error' refuses such writes, 'ignore' silences this.)`,
    );
  }
}

/** Sends `sql` on the runner's connection, bypassing TypeORM (no events, no logging). */
function send(runner: QueryRunner, sql: string): Promise<void> {
  const connection = (runner as QueryRunner & { databaseConnection?: RawConnection }).databaseConnection;
  if (!connection || typeof connection.query !== 'function') return Promise.reject(new Error('no driver connection'));
  return new Promise((resolve, reject) => {
    connection.query(sql, (error) => (error ? reject(error) : resolve()));
  });
}
