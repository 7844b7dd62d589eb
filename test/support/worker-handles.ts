/**
 * Worker functions (run in a LockWorker by this module's URL, WORKER_HANDLES) that take a lock and
 * keep its handle under a name, then let it go: for tests that interleave several processes' holds.
 */
import type { LockHandle } from '../../lib/index.js';
import type { WorkerContext } from './lock-worker.js';

export const WORKER_HANDLES = import.meta.url;

const handles = new Map<string, LockHandle>();

/** The lock on `key` (one key or several), kept as `name`: its token, or the error's name. */
export async function take(
  ctx: WorkerContext<{ key: string | string[]; mode: 'read' | 'write'; timeoutMs: number; name: string }>,
): Promise<number | string> {
  const { key, mode, timeoutMs, name } = ctx.args;
  try {
    const h = await ctx.locks.acquire(key, { mode, timeoutMs });
    handles.set(name, h);
    return h.fencingToken;
  } catch (e) {
    return (e as Error).name;
  }
}

/** Releases the lock kept as `name`: 'ok', or the error's name. */
export async function drop(ctx: WorkerContext<{ name: string }>): Promise<string> {
  const h = handles.get(ctx.args.name);
  handles.delete(ctx.args.name);
  try {
    await h?.release();
    return 'ok';
  } catch (e) {
    return (e as Error).name;
  }
}
