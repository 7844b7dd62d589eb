/** Scenarios for the stall tests in test/lease (stall-*.test.ts, janitor-*.test.ts), run inside worker processes (stopped with SIGSTOP by the test). */
import type { WorkerContext } from '../support/lock-worker.js';
import { blockLoop, hold } from './stall-holds.js';

export interface Outcome {
  token: number;
  outcome: string;
  message?: string;
  abortedBefore?: boolean;
  abortedAfter?: boolean;
  release?: string;
  releaseMessage?: string;
  extend?: string;
  /** Fenced stalls: where the hold began and ended against the lock's lease, in ms. */
  debug?: { insideAfterLeaseFrom: number; wokeAfterDeadline: number; state: string };
}

const nameOf = (e: unknown): string => (e as Error)?.name ?? String(e);
const messageOf = (e: unknown): string => (e as Error)?.message ?? String(e);

type FencedStallArgs = { key: string; who: string; leaseMs: number; holdMs: number; untilStopped?: boolean; table: string; blockMs?: number };

/**
 * A fenced call (runLocked, 'requires-new') that writes a business row through `locks.manager`,
 * emits 'inside', then holds (see hold: the test stops the process meanwhile) and returns: the
 * fence decides after the stall.
 */
export function fencedStall(ctx: WorkerContext<FencedStallArgs>): Promise<Outcome> {
  return stallInside(ctx, (work) => ctx.locks.runLocked(ctx.args.key, work, { leaseMs: ctx.args.leaseMs, timeoutMs: 10_000 }));
}

/** The same as a fenced semaphore call (runSemaphore). */
export function fencedPermitStall(ctx: WorkerContext<FencedStallArgs & { limit: number }>): Promise<Outcome> {
  return stallInside(ctx, (work) => ctx.locks.runSemaphore(ctx.args.key, ctx.args.limit, work, { leaseMs: ctx.args.leaseMs, timeoutMs: 10_000 }));
}

/** The work of fencedStall and fencedPermitStall, run by `call`; its outcome as the fence decided it. */
async function stallInside(ctx: WorkerContext<FencedStallArgs>, call: (work: () => Promise<void>) => Promise<unknown>): Promise<Outcome> {
  let token = 0;
  let debug: Outcome['debug'];
  try {
    await call(async () => {
      token = ctx.locks.currentLock!.fencingToken;
      const { runSql } = await import('../support/portable-sql.js');
      await runSql(ctx.locks.manager, `INSERT INTO ${ctx.args.table} (who, token) VALUES (?, ?)`, [ctx.args.who, token]);
      const lock = ctx.locks.currentLock as unknown as { leaseFrom: number; localDeadline: number; state: string };
      const insideAt = performance.now();
      ctx.emit('inside', { token });
      if (ctx.args.blockMs !== undefined) blockLoop(ctx.args.blockMs);
      else await hold(ctx.args);
      debug = {
        insideAfterLeaseFrom: Math.round(insideAt - lock.leaseFrom),
        wokeAfterDeadline: Math.round(performance.now() - lock.localDeadline),
        state: lock.state,
      };
    });
    return { token, outcome: 'committed', debug };
  } catch (error) {
    return { token, outcome: nameOf(error), message: messageOf(error), debug };
  }
}

/** A handle (acquire or acquireSemaphore) held across the stall: then its signal, extend() if asked, and release(). */
export async function handleStall(
  ctx: WorkerContext<{ key: string; leaseMs: number; holdMs: number; untilStopped?: boolean; limit?: number; extendMs?: number; blockMs?: number }>,
): Promise<Outcome> {
  const { key, leaseMs, limit } = ctx.args;
  const handle =
    limit === undefined
      ? await ctx.locks.acquire(key, { leaseMs, timeoutMs: 10_000 })
      : await ctx.locks.acquireSemaphore(key, limit, { leaseMs, timeoutMs: 10_000 });
  ctx.emit('inside', { token: handle.fencingToken });
  if (ctx.args.blockMs !== undefined) blockLoop(ctx.args.blockMs);
  else await hold(ctx.args);
  const result: Outcome = { token: handle.fencingToken, outcome: 'held' };
  if (ctx.args.extendMs !== undefined) {
    result.extend = await handle.extend(ctx.args.extendMs).then(
      () => 'extended',
      (e: unknown) => `${nameOf(e)}: ${messageOf(e)}`,
    );
  }
  result.abortedAfter = handle.signal.aborted;
  await handle.release().then(
    () => (result.release = 'released'),
    (e: unknown) => {
      result.release = nameOf(e);
      result.releaseMessage = messageOf(e);
    },
  );
  return result;
}

/** withLock / withSemaphore across the stall: the signal is read after it, and withLock's own release reports. */
export async function withStall(
  ctx: WorkerContext<{ key: string; leaseMs: number; holdMs: number; untilStopped?: boolean; limit?: number }>,
): Promise<Outcome> {
  let token = 0;
  let abortedAfter: boolean | undefined;
  const work = async (lock: { fencingToken: number; signal: AbortSignal }): Promise<void> => {
    token = lock.fencingToken;
    ctx.emit('inside', { token });
    await hold(ctx.args);
    abortedAfter = lock.signal.aborted;
  };
  const { key, leaseMs, limit } = ctx.args;
  try {
    if (limit === undefined) await ctx.locks.withLock(key, work, { leaseMs, timeoutMs: 10_000 });
    else await ctx.locks.withSemaphore(key, limit, work, { leaseMs, timeoutMs: 10_000 });
    return { token, outcome: 'released', abortedAfter };
  } catch (error) {
    return { token, outcome: nameOf(error), message: messageOf(error), abortedAfter };
  }
}

/** One acquire (lock or permit) and release: its token. */
export async function takeOnce(ctx: WorkerContext<{ key: string; leaseMs: number; limit?: number; timeoutMs?: number }>): Promise<Outcome> {
  const { key, leaseMs, limit } = ctx.args;
  try {
    const handle =
      limit === undefined
        ? await ctx.locks.acquire(key, { leaseMs, timeoutMs: ctx.args.timeoutMs ?? 10_000 })
        : await ctx.locks.acquireSemaphore(key, limit, { leaseMs, timeoutMs: ctx.args.timeoutMs ?? 10_000 });
    const token = handle.fencingToken;
    const release = await handle.release().then(
      () => 'released',
      (e: unknown) => `${nameOf(e)}: ${messageOf(e)}`,
    );
    return { token, outcome: 'acquired', release };
  } catch (error) {
    return { token: 0, outcome: nameOf(error), message: messageOf(error) };
  }
}

/** A fenced write by another holder (the taker). */
export async function fencedWrite(
  ctx: WorkerContext<{ key: string; who: string; leaseMs: number; table: string; limit?: number }>,
): Promise<Outcome> {
  let token = 0;
  const { runSql } = await import('../support/portable-sql.js');
  const work = async (): Promise<void> => {
    token = ctx.locks.currentLock!.fencingToken;
    await runSql(ctx.locks.manager, `INSERT INTO ${ctx.args.table} (who, token) VALUES (?, ?)`, [ctx.args.who, token]);
  };
  try {
    if (ctx.args.limit === undefined) await ctx.locks.runLocked(ctx.args.key, work, { leaseMs: ctx.args.leaseMs, timeoutMs: 15_000 });
    else await ctx.locks.runSemaphore(ctx.args.key, ctx.args.limit, work, { leaseMs: ctx.args.leaseMs, timeoutMs: 15_000 });
    return { token, outcome: 'committed' };
  } catch (error) {
    return { token, outcome: nameOf(error), message: messageOf(error) };
  }
}

/** The process's lease row id (for the test to age it by hand). */
export async function processId(ctx: WorkerContext): Promise<string> {
  const { partsOf } = await import('../support/lock-internals.js');
  return String((partsOf(ctx.locks).store.log as unknown as { processId: string }).processId);
}

/** Runs the janitor once here; returns its report or the error. */
export async function janitorOnce(ctx: WorkerContext): Promise<unknown> {
  ctx.emit('started');
  try {
    return await ctx.locks.runJanitor();
  } catch (error) {
    const { DbLockError } = await import('../../lib/index.js');
    return { error: `${nameOf(error)}: ${messageOf(error)}`, typed: error instanceof DbLockError };
  }
}

/**
 * A fenced call whose COMMIT is held up after its fence: a subscriber listening to transaction
 * events (so the commit goes through TypeORM, fence UPDATE then COMMIT) emits 'committing' in
 * beforeTransactionCommit and holds there (see hold: the test stops the process meanwhile).
 */
export async function fencedStallAtCommit(
  ctx: WorkerContext<{ key: string; who: string; leaseMs: number; holdMs: number; untilStopped?: boolean; table: string }>,
): Promise<Outcome> {
  const { DataSource } = await import('typeorm');
  const ds = ctx.app.get(DataSource);
  let armed = false;
  const subscriber = {
    beforeTransactionCommit: async (): Promise<void> => {
      if (!armed) return;
      armed = false;
      ctx.emit('committing');
      await hold(ctx.args);
    },
  };
  ds.subscribers.push(subscriber as never);
  let token = 0;
  try {
    await ctx.locks.runLocked(
      ctx.args.key,
      async () => {
        token = ctx.locks.currentLock!.fencingToken;
        const { runSql } = await import('../support/portable-sql.js');
        await runSql(ctx.locks.manager, `INSERT INTO ${ctx.args.table} (who, token) VALUES (?, ?)`, [ctx.args.who, token]);
        armed = true;
      },
      { leaseMs: ctx.args.leaseMs, timeoutMs: 10_000 },
    );
    return { token, outcome: 'committed' };
  } catch (error) {
    return { token, outcome: nameOf(error), message: messageOf(error) };
  } finally {
    ds.subscribers.splice(ds.subscribers.indexOf(subscriber as never), 1);
  }
}
