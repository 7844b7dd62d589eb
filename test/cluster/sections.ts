import { setTimeout as sleep } from 'node:timers/promises';
import type { DataSource, EntityManager } from 'typeorm';
import type { LockHandle, LockService } from '../../lib/index.js';
import { hasRowLock, type Lib } from './target.js';
import type { Belief, WorkerSettings } from './types.js';

/** The business tables of the suite: one counter row per key, one audit row per committed section. */
export const COUNTER_TABLE = 'cluster_counter';
export const HEARTBEAT_TABLE = 'cluster_heartbeat';
export const AUDIT_TABLE = 'cluster_audit';

/**
 * An error of the section's own business statements (not of the library). The library hands a
 * locked function's error back as it is, so the suite wraps its own to tell them apart: every
 * other error a caller sees must be one of the library's typed errors.
 */
export class BusinessError extends Error {
  /** The statement failed after the lock's signal had aborted (a row-lock holder's transaction is ended when its lock is lost). */
  afterLoss = false;
  constructor(readonly original: unknown) {
    super(`business statement failed: ${(original as Error)?.message ?? String(original)}`, { cause: original });
    this.name = 'BusinessError';
  }
}

type Query = (sql: string, parameters?: unknown[]) => Promise<unknown>;

async function business<T>(run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (error) {
    throw new BusinessError(error);
  }
}

/**
 * Wall clock, comparable across the worker processes of one machine: every process reads the same
 * system clock at that instant (performance.timeOrigin + now() would add each process's own
 * drift between the monotonic and the real-time clock).
 */
export const wall = (): number => Date.now();

const READ = `SELECT value, DATE_FORMAT(UTC_TIMESTAMP(6), '%Y-%m-%d %H:%i:%s.%f') AS t FROM ${COUNTER_TABLE} WHERE k = ?`;
const BUMP = `UPDATE ${COUNTER_TABLE} SET value = ? WHERE k = ?`;
const AUDIT = `INSERT INTO ${AUDIT_TABLE} (k, kind, worker, node, token, value_read, t_read, t_write) VALUES (?, ?, ?, ?, ?, ?, ?, UTC_TIMESTAMP(6))`;

export interface SectionCall {
  readonly key: string;
  readonly gapMs: number;
  readonly short: boolean;
}

/**
 * The racy read–sleep–write of a counter: read the value (with the server's time), wait, write
 * value + 1 and an audit row (value read, fencing token, server times of the read and the write).
 * Two sections that overlap read the same value: the audit shows it, and the counter ends short.
 */
async function readSleepWrite(
  read: Query,
  write: (statements: (query: Query) => Promise<void>) => Promise<void>,
  call: SectionCall,
  audit: { kind: string; token: number; settings: WorkerSettings },
  beforeWrite: () => void = () => undefined,
): Promise<void> {
  const rows = (await business(() => read(READ, [call.key]))) as { value: number; t: string }[];
  const row = rows[0];
  if (!row) throw new BusinessError(new Error(`no counter row for ${call.key}`));
  await sleep(call.gapMs);
  beforeWrite();
  const value = Number(row.value);
  await business(() =>
    write(async (query) => {
      await query(BUMP, [value + 1, call.key]);
      await query(AUDIT, [call.key, audit.kind, audit.settings.name, audit.settings.node, audit.token, value, row.t]);
    }),
  );
}

/** Runs `fn` as a withLock holder and records its belief: from the start of its work to its end or its signal's abort. */
async function believing(lock: LockHandle, call: SectionCall, settings: WorkerSettings, beliefs: Belief[], fn: () => Promise<void>): Promise<void> {
  const from = wall();
  let abortedAt = Infinity;
  lock.signal.addEventListener('abort', () => (abortedAt = Math.min(abortedAt, wall())), { once: true });
  try {
    await fn();
  } finally {
    beliefs.push({ key: call.key, token: lock.fencingToken, from, to: Math.min(wall(), abortedAt), worker: settings.name });
  }
}

export interface Sections {
  withLock(call: SectionCall): Promise<void>;
  fenced(call: SectionCall): Promise<void>;
  rowLock?(call: SectionCall): Promise<void>;
  hold(call: SectionCall): Promise<void>;
  unlocked(call: SectionCall): Promise<void>;
  heartbeat(): Promise<void>;
}

/**
 * The sections, bound to one running LockService. The decorated methods are declared here, once
 * the library under test is loaded (an older build has no row-lock strategy: no rowLock then).
 */
export function defineSections(lib: Lib, settings: WorkerSettings, locks: LockService, dataSource: DataSource, beliefs: Belief[]): Sections {
  const long = { timeoutMs: settings.timeoutMs };
  const short = { timeoutMs: settings.timeoutMs, leaseMs: settings.shortLeaseMs };
  const inFence = async (kind: string, call: SectionCall): Promise<void> => {
    const manager: EntityManager = locks.manager;
    const token = locks.currentLock!.fencingToken;
    const query: Query = (sql, parameters) => manager.query(sql, parameters);
    try {
      await readSleepWrite(query, (statements) => statements(query), call, { kind, token, settings });
    } catch (error) {
      if (error instanceof BusinessError && locks.currentLock?.signal.aborted) error.afterLoss = true;
      throw error;
    }
  };

  class FencedSections {
    @lib.WriteLock('{0}', long)
    async long(_key: string, call: SectionCall): Promise<void> {
      await inFence('fenced', call);
    }

    @lib.WriteLock('{0}', short)
    async short(_key: string, call: SectionCall): Promise<void> {
      await inFence('fenced', call);
    }
  }

  function rowLockSections() {
    class RowLockSections {
      @lib.WriteLock('{0}', { ...long, strategy: 'row-lock' })
      async long(_key: string, call: SectionCall): Promise<void> {
        await inFence('rowLock', call);
      }

      @lib.WriteLock('{0}', { ...short, strategy: 'row-lock' })
      async short(_key: string, call: SectionCall): Promise<void> {
        await inFence('rowLock', call);
      }
    }
    return new RowLockSections();
  }

  const fenced = new FencedSections();
  const rowLocked = hasRowLock(lib) ? rowLockSections() : undefined;
  const plain: Query = (sql, parameters) => dataSource.query(sql, parameters);
  const inTransaction = (statements: (query: Query) => Promise<void>) =>
    dataSource.transaction((manager) => statements((sql, parameters) => manager.query(sql, parameters)));

  return {
    withLock: (call) =>
      locks.withLock(
        call.key,
        (lock) =>
          believing(lock, call, settings, beliefs, () =>
            // A correct holder stops writing once its signal says the lock is gone.
            readSleepWrite(plain, inTransaction, call, { kind: 'withLock', token: lock.fencingToken, settings }, () => lock.signal.throwIfAborted()),
          ),
        { leaseMs: call.short ? settings.shortLeaseMs : settings.longLeaseMs },
      ),
    fenced: (call) => (call.short ? fenced.short(call.key, call) : fenced.long(call.key, call)),
    rowLock: rowLocked ? (call) => (call.short ? rowLocked.short(call.key, call) : rowLocked.long(call.key, call)) : undefined,
    hold: (call) =>
      locks.withLock(
        call.key,
        (lock) => believing(lock, call, settings, beliefs, () => sleep(call.gapMs)),
        { leaseMs: call.short ? settings.shortLeaseMs : settings.longLeaseMs },
      ),
    unlocked: (call) => readSleepWrite(plain, inTransaction, call, { kind: 'unlocked', token: 0, settings }),
    heartbeat: async () => {
      await dataSource.query(`INSERT INTO ${HEARTBEAT_TABLE} (worker, beats) VALUES (?, 1) ON DUPLICATE KEY UPDATE beats = beats + 1`, [settings.name]);
    },
  };
}
