import { setTimeout as sleep } from 'node:timers/promises';
import { DbLockError, type LockService } from '../../lib/index.js';

/** What a row-lock load met: error kinds by class name, and errors that were not DbLockErrors. */
export interface LoadOutcome {
  readonly kinds: Map<string, number>;
  readonly raw: string[];
  /** True once every worker finished. */
  readonly done: () => boolean;
  readonly finished: Promise<unknown>;
}

/**
 * The connection-budget tests' load for `runMs`: 12 callers on 3 row-lock keys (`r:0`..`r:2`) running
 * `work(c)` under the lock, a third of them single tries, one in six readers, beside an admin reader
 * (listLocks, inspect) every 10 ms. Every error is counted, never thrown.
 */
export function rowLockLoad(locks: LockService, runMs: number, work: (caller: number) => Promise<unknown>): LoadOutcome {
  const raw: string[] = [];
  const kinds = new Map<string, number>();
  const note = (e: unknown): void => {
    const k = (e as Error)?.constructor?.name;
    kinds.set(k, (kinds.get(k) ?? 0) + 1);
    if (!(e instanceof DbLockError)) raw.push(`${k}: ${(e as Error)?.message}`);
  };
  const until = performance.now() + runMs;
  const workers: Promise<void>[] = [];
  for (let c = 0; c < 12; c++)
    workers.push(
      (async () => {
        while (performance.now() < until) {
          await locks.runLocked(`r:${c % 3}`, () => work(c), { timeoutMs: c % 3 === 0 ? 0 : 250, mode: c % 6 === 2 ? 'read' : 'write' }).catch(note);
          await new Promise(setImmediate);
        }
      })(),
    );
  workers.push(
    (async () => {
      while (performance.now() < until) {
        await locks.listLocks({ limit: 3 }).catch(note);
        await locks.inspect('r:0').catch(note);
        await sleep(10);
      }
    })(),
  );
  let done = false;
  const finished = Promise.all(workers).finally(() => (done = true));
  return { kinds, raw, done: () => done, finished };
}
