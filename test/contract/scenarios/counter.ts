import { setTimeout as sleep } from 'node:timers/promises';
import { DataSource } from 'typeorm';
import type { WorkerContext } from '../../support/lock-worker.js';
import { runSql } from '../../support/portable-sql.js';
import { TestDatabase } from '../../support/test-database.js';

/** Business table of the exclusion tests: one counter row per test run. */
export const COUNTER_TABLE = 'test_counter';

/** A fresh test database with the counter table (on the target's server), for the tests whose workers run countUp. */
export async function counterDatabase(target: { readonly serverUrl?: URL } = {}): Promise<TestDatabase> {
  const db = await TestDatabase.forTarget(target);
  await db.query(`CREATE TABLE ${COUNTER_TABLE} (id INT PRIMARY KEY, value INT NOT NULL)${db.type === 'mysql' ? ' ENGINE=InnoDB' : ''}`);
  return db;
}

export interface CounterArgs {
  /** Lock key guarding the counter. */
  key: string;
  /** Counter row id. */
  counterId: number;
  /** Concurrent callers in this process. */
  callers: number;
  /** Critical sections per caller. */
  iterations: number;
  /** false: the negative control, the same racy read-then-write without the lock. */
  locked: boolean;
  /** The "small await" between reading and writing the counter, in ms. */
  gapMs: number;
  leaseMs?: number;
}

export interface CounterResult {
  sections: number;
  /** Fencing tokens this process was granted, one per critical section. */
  tokens: number[];
  /** Most callers of this process ever inside the critical section at once (1 if excluded locally). */
  maxInside: number;
  /** Longest wait for the lock, in ms. */
  maxWaitMs: number;
}

/**
 * `callers` concurrent loops, each doing `iterations` racy increments of the counter row: read the
 * value, await a little, write value + 1 — under `locks.withLock(key)` unless `locked` is false.
 * Lost updates (final counter < sections) mean two critical sections overlapped.
 */
export async function countUp(ctx: WorkerContext<CounterArgs>): Promise<CounterResult> {
  const { key, counterId, callers, iterations, locked, gapMs, leaseMs } = ctx.args;
  const dataSource = ctx.app.get(DataSource);
  const tokens: number[] = [];
  let inside = 0;
  let maxInside = 0;
  let maxWaitMs = 0;

  const bump = async (): Promise<void> => {
    inside++;
    maxInside = Math.max(maxInside, inside);
    try {
      const rows = (await runSql(dataSource, `SELECT value FROM ${COUNTER_TABLE} WHERE id = ?`, [counterId])) as { value: number }[];
      const value = Number(rows[0]!.value);
      await sleep(gapMs);
      await runSql(dataSource, `UPDATE ${COUNTER_TABLE} SET value = ? WHERE id = ?`, [value + 1, counterId]);
    } finally {
      inside--;
    }
  };

  const loop = async (): Promise<void> => {
    for (let i = 0; i < iterations; i++) {
      if (!locked) {
        await bump();
        continue;
      }
      const askedAt = performance.now();
      await ctx.locks.withLock(
        key,
        async (lock) => {
          maxWaitMs = Math.max(maxWaitMs, performance.now() - askedAt);
          tokens.push(lock.fencingToken);
          await bump();
        },
        { timeoutMs: 120_000, leaseMs },
      );
    }
  };
  await Promise.all(Array.from({ length: callers }, loop));
  return { sections: callers * iterations, tokens, maxInside, maxWaitMs };
}

/** What this process's clock says (clock-skew tests check the preload took effect). */
export async function clockReading(): Promise<{ dateNow: number; newDate: number }> {
  return { dateNow: Date.now(), newDate: new Date().getTime() };
}
