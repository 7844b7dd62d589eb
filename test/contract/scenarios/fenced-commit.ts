import 'reflect-metadata';
import { Injectable } from '@nestjs/common';
import { LockService, WriteLock } from '../../../lib/index.js';
import type { WorkerContext } from '../../support/lock-worker.js';
import { runSql } from '../../support/portable-sql.js';

/**
 * Blocks the event loop: the holder is "between its business write and its commit" and nothing
 * else of it runs meanwhile (no renewal, no timer), like a long GC pause. The parent SIGSTOPs it
 * inside this window and keeps it stopped until another process has taken the key over.
 */
function stall(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    /* busy */
  }
}

@Injectable()
export class FenceService {
  constructor(readonly locks: LockService) {}

  /** Two business writes in the fenced transaction, then (holders only) a stall before the commit. */
  @WriteLock('fence:{0}', { timeoutMs: 20_000 })
  async write(key: string, round: number, writer: string, stallMs: number, emit: (event: string) => void): Promise<number> {
    return this.body(key, round, writer, stallMs, emit);
  }

  /**
   * The taker's side: the same work under a longer lease, so that on a loaded 2-core machine its
   * own lease cannot run out unrenewed while the stalled holders' processes hog the CPU.
   */
  @WriteLock('fence:{0}', { timeoutMs: 20_000, leaseMs: 5_000 })
  async take(key: string, round: number, writer: string, stallMs: number, emit: (event: string) => void): Promise<number> {
    return this.body(key, round, writer, stallMs, emit);
  }

  /**
   * The control's holder: the same work under a lease long enough that, however loaded the
   * machine, it runs out during the stall (the parent waits for that by the server clock), not
   * before it, when a late renewal would lose it on purpose.
   */
  @WriteLock('fence:{0}', { timeoutMs: 20_000, leaseMs: 1_000 })
  async control(key: string, round: number, writer: string, stallMs: number, emit: (event: string) => void): Promise<number> {
    return this.body(key, round, writer, stallMs, emit);
  }

  private async body(key: string, round: number, writer: string, stallMs: number, emit: (event: string) => void): Promise<number> {
    const manager = this.locks.manager;
    const token = this.locks.currentLock!.fencingToken;
    emit('granted');
    await runSql(manager, 'INSERT INTO fence_writes (k, round, writer, token) VALUES (?, ?, ?, ?)', [key, round, writer, token]);
    await runSql(manager, 'UPDATE fence_counters SET n = n + 1, last_writer = ? WHERE k = ?', [writer, key]);
    emit('wrote');
    if (stallMs > 0) stall(stallMs);
    return token;
  }
}

export const providers = [FenceService];

type Outcome = { outcome: 'committed'; token: number } | { outcome: 'lost'; byDatabaseFence: boolean; message: string };

/** One call of the locked method; LockLostError is an outcome, anything else an error. */
export async function writeOnce(
  ctx: WorkerContext<{ key: string; round: number; writer: string; stallMs: number; control?: boolean }>,
): Promise<Outcome> {
  const { key, round, writer, stallMs } = ctx.args;
  try {
    const service = ctx.app.get(FenceService);
    const emit = (event: string): void => ctx.emit(event);
    const call = ctx.args.control ? service.control : writer === 'B' ? service.take : service.write;
    const token = await call.call(service, key, round, writer, stallMs, emit);
    return { outcome: 'committed', token };
  } catch (error) {
    const e = error as Error;
    if (e?.name !== 'LockLostError') throw error;
    // The message tells which check caught it: the fence statement inside the transaction, or the
    // watchdog (renewal found the rows taken over) before the fence ran.
    return { outcome: 'lost', byDatabaseFence: e.message.includes('before this transaction could commit'), message: e.message };
  }
}
