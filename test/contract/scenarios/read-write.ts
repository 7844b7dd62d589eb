import { setTimeout as sleep } from 'node:timers/promises';
import { DataSource } from 'typeorm';
import type { LockMode } from '../../../lib/index.js';
import type { WorkerContext } from '../../support/lock-worker.js';
import { runSql } from '../../support/portable-sql.js';
import { acquisitionIdOf } from '../../support/lock-internals.js';

/**
 * Overlap detector shared by every process: one row whose counters are changed inside the
 * critical sections by single atomic UPDATEs. Assignments are ordered so that the result is the
 * same whether the server assigns left to right (MySQL/MariaDB default) or simultaneously:
 * `violations` only ever reads the values from before the statement (PostgreSQL's way). The
 * statements are written for both servers (CASE, not MySQL's boolean arithmetic); the table's
 * options (InnoDB) are the test database's to add (`db.sql.tableOptions`).
 */
export const PROBE_TABLE_SQL =
  'CREATE TABLE rw_probe (id INT PRIMARY KEY, readers INT NOT NULL DEFAULT 0, writers INT NOT NULL DEFAULT 0, ' +
  'max_readers INT NOT NULL DEFAULT 0, reader_entries INT NOT NULL DEFAULT 0, reader_sum BIGINT NOT NULL DEFAULT 0, ' +
  'writer_entries INT NOT NULL DEFAULT 0, violations INT NOT NULL DEFAULT 0)';

const ENTER: Record<LockMode, string> = {
  // A writer must find nobody inside.
  write:
    'UPDATE rw_probe SET violations = violations + CASE WHEN readers <> 0 OR writers <> 0 THEN 1 ELSE 0 END, writer_entries = writer_entries + 1, ' +
    'writers = writers + 1 WHERE id = ?',
  // A reader must find no writer inside; it records how many readers are inside with it.
  read:
    'UPDATE rw_probe SET violations = violations + CASE WHEN writers <> 0 THEN 1 ELSE 0 END, max_readers = GREATEST(max_readers, readers + 1), ' +
    'reader_sum = reader_sum + readers + 1, reader_entries = reader_entries + 1, readers = readers + 1 WHERE id = ?',
};
const LEAVE: Record<LockMode, string> = {
  write: 'UPDATE rw_probe SET violations = violations + CASE WHEN readers <> 0 OR writers <> 1 THEN 1 ELSE 0 END, writers = writers - 1 WHERE id = ?',
  read: 'UPDATE rw_probe SET violations = violations + CASE WHEN writers <> 0 OR readers < 1 THEN 1 ELSE 0 END, readers = readers - 1 WHERE id = ?',
};

export interface LoopArgs {
  key: string;
  /** Mode the critical section claims to be (what the probe checks). */
  role: LockMode;
  /** Mode actually asked of the lock; differs from `role` only in the detector's control run. */
  lockMode?: LockMode;
  iterations: number;
  holdMs: number;
  probeId: number;
  timeoutMs?: number;
}

/** `iterations` critical sections of `role` under the lock; returns each wait for the lock, in ms. */
export async function loop(ctx: WorkerContext<LoopArgs>): Promise<{ waits: number[] }> {
  const { key, role, iterations, holdMs, probeId } = ctx.args;
  const db = ctx.app.get(DataSource);
  const waits: number[] = [];
  for (let i = 0; i < iterations; i++) {
    const asked = performance.now();
    await ctx.locks.withLock(
      key,
      async () => {
        waits.push(performance.now() - asked);
        await runSql(db, ENTER[role], [probeId]);
        if (holdMs > 0) await sleep(holdMs);
        await runSql(db, LEAVE[role], [probeId]);
      },
      { mode: ctx.args.lockMode ?? role, timeoutMs: ctx.args.timeoutMs ?? 30_000 },
    );
  }
  return { waits };
}

/**
 * A reader that keeps re-taking `key` until `stopAt` (epoch ms, shared by all processes) and
 * never lets the key go free: it leaves the probe only by an atomic "readers - 1 if another
 * reader is inside", and releases the lock after that, so once two readers are in, some reader
 * holds the key at every instant. Past `maxHoldMs` it leaves anyway, so a writer that holds new
 * readers back (writer preference) is not deadlocked. With writer preference off, a writer never
 * finds the key free while these run: it starves.
 */
export async function overlappingReader(
  ctx: WorkerContext<{ key: string; stopAt: number; maxHoldMs: number; probeId: number }>,
): Promise<{ sections: number; forcedLeaves: number }> {
  const { key, stopAt, maxHoldMs, probeId } = ctx.args;
  const db = ctx.app.get(DataSource);
  let sections = 0;
  let forcedLeaves = 0;
  while (Date.now() < stopAt) {
    await ctx.locks.withLock(
      key,
      async () => {
        sections++;
        await runSql(db, ENTER.read, [probeId]);
        const leaveBy = performance.now() + maxHoldMs;
        for (;;) {
          const result = (await runSql(db, 'UPDATE rw_probe SET readers = readers - 1 WHERE id = ? AND readers >= 2', [probeId])) as {
            affectedRows: number;
          };
          if (result.affectedRows === 1) return;
          if (performance.now() >= leaveBy || Date.now() >= stopAt) break;
          await sleep(2);
        }
        forcedLeaves++;
        await runSql(db, LEAVE.read, [probeId]);
      },
      { mode: 'read', timeoutMs: 60_000 },
    );
  }
  return { sections, forcedLeaves };
}

/**
 * A reader stream: takes `key` for reading, holds `holdMs`, releases, and at once asks again,
 * until `stopAt`. Returns how many sections it ran.
 */
export async function streamReader(
  ctx: WorkerContext<{ key: string; stopAt: number; holdMs: number; probeId: number }>,
): Promise<{ sections: number }> {
  const { key, stopAt, holdMs, probeId } = ctx.args;
  const db = ctx.app.get(DataSource);
  let sections = 0;
  while (Date.now() < stopAt) {
    await ctx.locks.withLock(
      key,
      async () => {
        sections++;
        await runSql(db, ENTER.read, [probeId]);
        await sleep(holdMs);
        await runSql(db, LEAVE.read, [probeId]);
      },
      { mode: 'read', timeoutMs: 60_000 },
    );
  }
  return { sections };
}

/** Takes `key` for writing every `everyMs` until `stopAt`; returns each wait in ms (or -1 for a timeout). */
export async function periodicWriter(
  ctx: WorkerContext<{ key: string; stopAt: number; everyMs: number; timeoutMs: number; probeId: number }>,
): Promise<{ waits: number[]; timeouts: number }> {
  const { key, stopAt, everyMs, timeoutMs, probeId } = ctx.args;
  const db = ctx.app.get(DataSource);
  const waits: number[] = [];
  let timeouts = 0;
  while (Date.now() + timeoutMs < stopAt) {
    const asked = performance.now();
    try {
      await ctx.locks.withLock(
        key,
        async () => {
          waits.push(performance.now() - asked);
          await runSql(db, ENTER.write, [probeId]);
          await runSql(db, LEAVE.write, [probeId]);
        },
        { mode: 'write', timeoutMs },
      );
    } catch (error) {
      if ((error as Error).name !== 'LockTimeoutError') throw error;
      timeouts++;
    }
    await sleep(everyMs);
  }
  return { waits, timeouts };
}

/** Takes `key` once for writing (after `startAt`, epoch ms, if given) and returns how long it waited. */
export async function writeOnce(
  ctx: WorkerContext<{ key: string; timeoutMs: number; leaseMs?: number }>,
): Promise<{ waitedMs: number; fencingToken: number; owner: string }> {
  const asked = performance.now();
  const lock = await ctx.locks.acquire(ctx.args.key, { mode: 'write', timeoutMs: ctx.args.timeoutMs, leaseMs: ctx.args.leaseMs });
  const waitedMs = performance.now() - asked;
  ctx.emit('acquired');
  await lock.release();
  return { waitedMs, fencingToken: lock.fencingToken, owner: acquisitionIdOf(lock) };
}

/**
 * Takes `key` for reading, says 'acquired', keeps it `holdMs` (the test may SIGSTOP the process
 * meanwhile), then releases. Returns what the release said and whether the signal had fired.
 */
export async function readThenRelease(
  ctx: WorkerContext<{ key: string; holdMs: number; leaseMs: number }>,
): Promise<{ fencingToken: number; release: string; aborted: boolean }> {
  const lock = await ctx.locks.acquire(ctx.args.key, { mode: 'read', leaseMs: ctx.args.leaseMs });
  ctx.emit('acquired', { fencingToken: lock.fencingToken });
  await sleep(ctx.args.holdMs);
  const aborted = lock.signal.aborted;
  const release = await lock.release().then(
    () => 'released',
    (error: unknown) => (error as Error).name,
  );
  return { fencingToken: lock.fencingToken, release, aborted };
}

/** Takes `key` once for reading and returns how long it waited, in ms. */
export async function readOnce(ctx: WorkerContext<{ key: string; timeoutMs: number }>): Promise<{ waitedMs: number }> {
  const asked = performance.now();
  const lock = await ctx.locks.acquire(ctx.args.key, { mode: 'read', timeoutMs: ctx.args.timeoutMs });
  const waitedMs = performance.now() - asked;
  await lock.release();
  return { waitedMs };
}
