import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { DataSource, type EntityManager } from 'typeorm';
import { DbLockError, LockTimeoutError, type LockStrategyName } from '../../lib/index.js';
import type { WorkerContext } from '../support/lock-worker.js';

/**
 * Worker side of the chaos suite: critical sections under attack, each leaving evidence the
 * checker reads from the database without trusting the library.
 *
 * - 'fenced': `runLocked` with its fenced transaction: read a counter, pause, write it back plus
 *   one, and insert an audit row (token, server times at entry and exit) in the same transaction.
 *   Only committed sections leave a row, so overlapping rows or a counter that differs from the
 *   row count is a violation.
 * - 'signal': `withLock` with no transaction, as code guarding work outside the database would:
 *   take the server time at entry, pause, take it at exit, THEN read `signal.aborted`. A section
 *   whose signal was not aborted after its exit time claims it held the lock all along: two such
 *   sections of a key must never overlap, nor one with a fenced section.
 * - locked: false, the negative control: the same bodies with no lock at all.
 */
export const CHAOS_TABLES = [
  'CREATE TABLE chaos_counter (k VARCHAR(32) PRIMARY KEY, n INT NOT NULL DEFAULT 0) ENGINE=InnoDB',
  'CREATE TABLE chaos_audit (id BIGINT AUTO_INCREMENT PRIMARY KEY, k VARCHAR(32) NOT NULL, style VARCHAR(8) NOT NULL, ' +
    'strategy VARCHAR(8) NOT NULL, pid INT NOT NULL, token BIGINT NOT NULL, entered_at DATETIME(6) NOT NULL, exited_at DATETIME(6) NOT NULL, ' +
    'aborted TINYINT NOT NULL DEFAULT 0, section CHAR(36) NULL, KEY (k, entered_at)) ENGINE=InnoDB',
  // A row-lock hold's token commits with its transaction. A signal section writes its audit row
  // outside that transaction (it models work outside the database), so it also leaves a marker
  // inside it: the marker exists exactly when the hold committed, and only committed holds owe
  // strictly increasing tokens.
  'CREATE TABLE chaos_commit (section CHAR(36) PRIMARY KEY) ENGINE=InnoDB',
];

export type SectionStyle = 'fenced' | 'signal';

export interface ChaosLoopArgs {
  keys: string[];
  style: SectionStyle;
  strategy: LockStrategyName;
  durationMs: number;
  callers: number;
  timeoutMs: number;
  leaseMs: number;
  /** Pause inside the section, ms (random up to this). */
  gapMs: number;
  locked: boolean;
}

export interface ChaosLoopResult {
  sections: number;
  timeouts: number;
  /** Timeouts that came later than timeoutMs + TIMEOUT_EPSILON_MS (judged only in processes never paused). */
  lateTimeouts: number;
  /** DbLockError subclasses other than timeouts (lost locks, connection errors...). */
  typed: Record<string, number>;
  /** The business statements' own failures (a killed business connection): the caller's errors, not the library's. */
  business: number;
  /** Anything else: must stay empty. */
  untyped: string[];
}

/** A timeout may come this much late: the grant grace (250 ms), a retry after a killed statement, a loaded 2-core machine. */
export const TIMEOUT_EPSILON_MS = 1_500;

/** Marks an error thrown by the section's own business statements. */
class BusinessStatementError extends Error {
  constructor(readonly original: unknown) {
    super(`business statement failed: ${String((original as Error)?.message ?? original)}`);
  }
}

async function business<T>(statement: () => Promise<T>): Promise<T> {
  try {
    return await statement();
  } catch (error) {
    throw new BusinessStatementError(error);
  }
}

async function serverNow(query: (sql: string) => Promise<unknown>): Promise<string> {
  const rows = (await business(() => query('SELECT DATE_FORMAT(UTC_TIMESTAMP(6), "%Y-%m-%d %H:%i:%s.%f") AS t'))) as { t: string }[];
  return rows[0]!.t;
}

export async function chaosLoop(ctx: WorkerContext<ChaosLoopArgs>): Promise<ChaosLoopResult> {
  const a = ctx.args;
  const dataSource = ctx.app.get(DataSource);
  const result: ChaosLoopResult = { sections: 0, timeouts: 0, lateTimeouts: 0, typed: {}, business: 0, untyped: [] };
  const until = performance.now() + a.durationMs;

  const fencedBody = async (manager: EntityManager, key: string, token: number): Promise<void> => {
    const q = (sql: string, params: unknown[] = []) => manager.query(sql, params);
    const entered = await serverNow(q);
    const [row] = (await business(() => q('SELECT n FROM chaos_counter WHERE k = ?', [key]))) as { n: number }[];
    await sleep(Math.random() * a.gapMs);
    await business(() => q('UPDATE chaos_counter SET n = ? WHERE k = ?', [Number(row!.n) + 1, key]));
    const exited = await serverNow(q);
    await business(() =>
      q('INSERT INTO chaos_audit (k, style, strategy, pid, token, entered_at, exited_at) VALUES (?, ?, ?, ?, ?, ?, ?)', [
        key,
        'fenced',
        a.locked ? a.strategy : 'none',
        process.pid,
        token,
        entered,
        exited,
      ]),
    );
  };

  const signalBody = async (key: string, token: number, signal: AbortSignal | undefined, holdManager?: EntityManager): Promise<void> => {
    const q = (sql: string, params: unknown[] = []) => dataSource.query(sql, params);
    const section = holdManager ? randomUUID() : null;
    const entered = await serverNow(q);
    await sleep(Math.random() * a.gapMs);
    const exited = await serverNow(q);
    const aborted = signal?.aborted ? 1 : 0; // read after the exit time was taken
    await business(() =>
      q('INSERT INTO chaos_audit (k, style, strategy, pid, token, entered_at, exited_at, aborted, section) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)', [
        key,
        'signal',
        a.locked ? a.strategy : 'none',
        process.pid,
        token,
        entered,
        exited,
        aborted,
        section,
      ]),
    );
    if (holdManager) await business(() => holdManager.query('INSERT INTO chaos_commit (section) VALUES (?)', [section]));
  };

  /** Where each caller is (acquiring, in its body, releasing): a hang report says which step never ended. */
  const phase = new Map<number, string>();
  const section = async (key: string, id: number): Promise<void> => {
    const step = (what: string) => phase.set(id, `${what} since ${new Date().toISOString()}`);
    step('acquiring');
    const options = { timeoutMs: a.timeoutMs, leaseMs: a.leaseMs, strategy: a.strategy };
    if (!a.locked) {
      if (a.style === 'fenced') await dataSource.transaction('READ COMMITTED', (manager) => fencedBody(manager, key, 0));
      else await signalBody(key, 0, undefined);
      return;
    }
    if (a.style === 'fenced') {
      await ctx.locks.runLocked(
        key,
        async () => {
          step(`in the body (token ${ctx.locks.currentLock!.fencingToken})`);
          await fencedBody(ctx.locks.manager, key, ctx.locks.currentLock!.fencingToken);
          step('committing and releasing');
        },
        options,
      );
    } else {
      await ctx.locks.withLock(
        key,
        async (lock) => {
          step(`in the body (token ${lock.fencingToken})`);
          await signalBody(key, lock.fencingToken, lock.signal, lock.manager);
          step('releasing');
        },
        { ...options },
      );
    }
  };

  // A section that never ends hangs the run: name it on stderr, so a timed-out run says where.
  const inSection = new Map<number, string>();
  const hangReport = setInterval(() => {
    if (performance.now() < until + 15_000) return;
    // What the process's lock service sees, so that a hang report also says whether the caller waits on a lock or on something else.
    let seen = '';
    try {
      const stats = ctx.locks.stats();
      seen = ` (this process: ${stats.held} held, ${stats.waiting} waiting, ${stats.acquired} acquired, ${stats.timedOut} timed out, ${stats.lost} lost)`;
    } catch (error) {
      seen = ` (stats: ${String(error)})`;
    }
    for (const [caller, what] of inSection)
      process.stderr.write(`chaos: pid ${process.pid} caller ${caller} still in ${what}: ${phase.get(caller)}${seen}\n`);
  }, 5_000);
  hangReport.unref();
  const caller = async (id: number): Promise<void> => {
    while (performance.now() < until) {
      const key = a.keys[Math.floor(Math.random() * a.keys.length)]!;
      const started = performance.now();
      inSection.set(id, `a ${a.style} ${a.strategy} section on ${key} entered at ${new Date().toISOString()}`);
      try {
        await section(key, id);
        result.sections++;
      } catch (error) {
        record(result, error, performance.now() - started, a.timeoutMs);
        await sleep(5);
      }
      inSection.delete(id);
    }
  };
  await Promise.all(Array.from({ length: a.callers }, (_, id) => caller(id)));
  clearInterval(hangReport);
  return result;
}

function record(result: ChaosLoopResult, error: unknown, elapsedMs: number, timeoutMs: number): void {
  if (error instanceof LockTimeoutError) {
    result.timeouts++;
    if (elapsedMs > timeoutMs + TIMEOUT_EPSILON_MS) result.lateTimeouts++;
  } else if (error instanceof DbLockError) {
    result.typed[error.name] = (result.typed[error.name] ?? 0) + 1;
  } else if (error instanceof BusinessStatementError) {
    result.business++;
  } else if (result.untyped.length < 20) {
    const e = error as Error;
    result.untyped.push(`${e?.name}: ${e?.message}`.slice(0, 300));
  }
}

/** Blocks the worker's event loop (a long synchronous computation): timers, renewals and I/O all wait. */
export async function blockEventLoop(ctx: WorkerContext<{ ms: number }>): Promise<void> {
  const until = performance.now() + ctx.args.ms;
  while (performance.now() < until) {
    /* busy */
  }
}
