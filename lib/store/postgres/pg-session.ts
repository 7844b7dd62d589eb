import type pg from 'pg';
import type { DataSource, QueryRunner } from 'typeorm';
import type { SessionTransactions } from '../lock-store.js';
import type { PgLockPool } from './pg-pool.js';
import { awaitSessionGone } from '../await-session-gone.js';
import { ANSWER_BOUND_MS } from '../answer-bound.js';
import { LockStatementError } from '../lock-statement.error.js';
import { deadlines } from '../../core/deadline-watch.js';
import { markClosed, markOpened, mayCommitStraight, mayOpenStraight, transactionEventsObserved } from '../session-state.js';

/** What the store reaches under TypeORM's PostgreSQL runner: its pg client and its release. */
interface RunnerState {
  isReleased: boolean;
  databaseConnection?: pg.PoolClient & { processID?: number; connection?: { stream?: { localPort?: number; destroy(): void; destroyed?: boolean } } };
  releasePostgresConnection?: (error?: Error) => Promise<void>;
}

const stateOf = (runner: QueryRunner): RunnerState => runner as unknown as RunnerState;

/**
 * The library's statements on a business transaction's connection (the row-lock's take and audit
 * rows, BEGIN and COMMIT), sent to the pg client under TypeORM's runner in one simple-query round
 * trip, one result per statement. A released runner refuses as TypeORM does.
 */
export async function sessionQuery(runner: QueryRunner, sql: string): Promise<pg.QueryResult[]> {
  if (runner.isReleased) {
    await runner.query(sql); // refuses, as TypeORM does
    return [];
  }
  const client = stateOf(runner).databaseConnection ?? ((await runner.connect()) as RunnerState['databaseConnection'])!;
  const answer = (await client.query(sql)) as pg.QueryResult | pg.QueryResult[];
  return Array.isArray(answer) ? answer : [answer];
}

/**
 * The library's own transactions on the app's DataSource, straight on the pg client where it may
 * (see session-state.ts), and the sessions it cuts under running work.
 */
export class PgSessionTransactions implements SessionTransactions {
  /** Cut sessions the server may still run (see sessionGone). */
  private readonly leaving = new Set<Promise<void>>();

  constructor(
    private readonly dataSource: DataSource,
    /** Where a cut session is looked for on the server, and terminated if it lingers; without it the socket's end is all. */
    private readonly pool?: PgLockPool,
  ) {}

  /** Ends the session under running work (see cutSession); resolves once the server no longer runs it (see sessionGone). */
  cut(runner: QueryRunner): Promise<void> {
    const cut = cutSession(runner);
    if (!this.pool) return Promise.resolve();
    const gone = sessionGone(cut, this.pool).finally(() => this.leaving.delete(gone));
    this.leaving.add(gone);
    return gone;
  }

  /** Resolves once every session cut so far is gone from the server. */
  async cutsGone(): Promise<void> {
    await Promise.all(this.leaving);
  }

  /**
   * A statement that ends a business transaction (the fence, the audit rows, COMMIT), bounded by
   * ANSWER_BOUND_MS: on the app's connection no statement_timeout or lock_timeout of the library's
   * applies, so a server that holds it (a lock on the log table, a stalled disk) would keep the
   * caller for as long. Past the bound the session is cut, so the server rolls the transaction
   * back, and the caller gets a deadline failure, typed as a commit of unknown outcome.
   */
  ending(runner: QueryRunner, sql: string): Promise<pg.QueryResult[]> {
    const sent = sessionQuery(runner, sql);
    return new Promise((resolve, reject) => {
      let settled = false;
      const watched = deadlines.watch(performance.now() + ANSWER_BOUND_MS, () => {
        if (settled) return;
        settled = true;
        void this.cut(runner).catch(() => undefined);
        reject(LockStatementError.deadline('The statement ending the transaction did not answer before the deadline'));
      });
      const answered = (settle: () => void): void => {
        watched.cancel();
        if (settled) return;
        settled = true;
        settle();
      };
      sent.then(
        (results) => answered(() => resolve(results)),
        (error: unknown) => answered(() => reject(error)),
      );
    });
  }

  async begin(runner: QueryRunner, isolationLevel?: string): Promise<void> {
    const sent = this.beginVia(runner, beginStatement(isolationLevel));
    if (sent === undefined) await runner.startTransaction(isolationLevel as Parameters<QueryRunner['startTransaction']>[0]);
    else await sent;
  }

  /**
   * Sends `sql`, which opens the transaction (BEGIN and what follows it in the same round trip),
   * with the runner marked in a transaction first, so that a failure part-way is rolled back by the
   * caller's usual ROLLBACK; undefined (nothing sent) where it must open through TypeORM.
   */
  beginVia(runner: QueryRunner, sql: string): Promise<pg.QueryResult[]> | undefined {
    if (transactionEventsObserved(this.dataSource) || !mayOpenStraight(runner)) return undefined;
    markOpened(runner);
    return sessionQuery(runner, sql);
  }

  commit(runner: QueryRunner): Promise<void> {
    return this.commitVia(runner, 'COMMIT') ?? runner.commitTransaction();
  }

  /**
   * Commits by sending `sql` (ending in COMMIT); the runner is marked committed only if it
   * succeeded. PostgreSQL answers the COMMIT of an aborted transaction (a statement of it failed
   * and the work caught the error) with ROLLBACK and no error: that is a failure here, or the call
   * would report work as committed that the server rolled back.
   */
  commitVia(runner: QueryRunner, sql: string): Promise<void> | undefined {
    if (transactionEventsObserved(this.dataSource) || !mayCommitStraight(runner)) return undefined;
    return this.ending(runner, sql).then((results) => {
      markClosed(runner);
      if (results.at(-1)?.command === 'ROLLBACK') throw rolledBackAtCommit();
    });
  }
}

/** The error of a COMMIT the server answered with ROLLBACK, with in_failed_sql_transaction's SQLSTATE. */
function rolledBackAtCommit(): Error {
  const message = 'COMMIT was answered with ROLLBACK: a statement of the transaction had failed, so the server rolled it back';
  return Object.assign(new Error(message), { code: '25P02' });
}

/** BEGIN at an isolation level (one of TypeORM's, checked by the caller), else the session's. */
export function beginStatement(isolationLevel?: string): string {
  return isolationLevel ? `BEGIN ISOLATION LEVEL ${isolationLevel}` : 'BEGIN';
}

/** What identifies a cut session on the server: its backend pid, and the client port it lists it under. */
export interface CutSession {
  readonly pid?: number;
  readonly localPort?: number;
}

/**
 * Ends the session under running work (RowLockStore.cutSession): the client's socket is destroyed,
 * so a statement in flight fails at once and the server rolls back; TypeORM's runner releases the
 * client with an error, so the pool drops it and the runner refuses further statements. Never a
 * ROLLBACK: a statement the work sends after it would run outside any lock.
 */
export function cutSession(runner: QueryRunner): CutSession {
  const state = stateOf(runner);
  const client = state.databaseConnection;
  const stream = client?.connection?.stream;
  const cut = { pid: client?.processID, localPort: stream?.localPort };
  if (stream && !stream.destroyed) stream.destroy();
  void state.releasePostgresConnection?.(new Error('nestjs-db-lock: the session was cut under running work'));
  state.isReleased = true;
  return cut;
}

/** Watches the session's connection; `onClose` when it breaks or ends. Returns the unwatch function. */
export function watchSession(runner: QueryRunner, onClose: (error?: unknown) => void): () => void {
  const client = stateOf(runner).databaseConnection;
  client?.once('error', onClose);
  client?.once('end', onClose);
  return () => {
    client?.off('error', onClose);
    client?.off('end', onClose);
  };
}

/**
 * Resolves once the server no longer lists the cut session, or after a bound (see
 * awaitSessionGone): a backend blocked in a lock wait notices its closed client only when it next
 * writes to it, and may be granted the row meanwhile; one listed under our client port is
 * terminated, once.
 */
export function sessionGone(cut: CutSession, pool: PgLockPool): Promise<void> {
  if (typeof cut.pid !== 'number') return Promise.resolve();
  const pid = Math.trunc(cut.pid);
  const port = cut.localPort === undefined ? 'NULL' : String(Math.trunc(cut.localPort));
  const look = `SELECT count(*)::int AS listed, count(*) FILTER (WHERE client_port = ${port})::int AS ours FROM pg_stat_activity WHERE pid = ${pid}`;
  return awaitSessionGone(
    async () => {
      const row = (await pool.query(look, 'admin'))[0]?.rows[0] as { listed: number; ours: number } | undefined;
      return { listed: (row?.listed ?? 0) > 0, ours: (row?.ours ?? 0) > 0 };
    },
    () => pool.query(`SELECT pg_terminate_backend(${pid})`, 'admin'),
  );
}
