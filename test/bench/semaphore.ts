import type { BenchConfig } from './config.js';
import { type Figure, figure, hostNow } from './stats.js';
import { createLockApp } from '../support/lock-app.js';
import type { TestDatabase } from '../support/test-database.js';
import { LockWorker } from '../support/worker-host.js';
import type { SemaphoreLoadArgs } from './scenarios/semaphore.js';

/** The semaphore's limit in the contended figures. */
export const SEMAPHORE_LIMIT = 3;
/** Work inside each entry of the contended figures, in ms. */
export const SEMAPHORE_WORK_MS = 10;

export interface SemaphoreResult {
  /** Sequential acquire + release, ms per operation: withLock vs withSemaphore(limit 3), one process, uncontended. */
  readonly uncontended: { readonly lock: Figure; readonly semaphore: Figure };
  /** Entries per second on one key, processes × callers each doing SEMAPHORE_WORK_MS of work inside. */
  readonly contended: { readonly lock: Figure; readonly semaphore: Figure };
}

const SCENARIO = new URL('./scenarios/semaphore.js', import.meta.url).href;

/** Semaphore vs lock on the same work, rounds interleaved (lock, then semaphore) so background load hits both alike. */
export async function semaphoreSection(db: TestDatabase, config: BenchConfig, log: (line: string) => void): Promise<SemaphoreResult> {
  const { app, locks } = await createLockApp(db.settings, { janitor: false });
  const perOp = { lock: [] as number[], semaphore: [] as number[] };
  try {
    for (let round = 0; round < config.rounds; round++) {
      for (const kind of ['lock', 'semaphore'] as const) {
        const key = `bench-sem-uncontended-${kind}`;
        const started = hostNow();
        for (let i = 0; i < config.opsPerRound; i++) {
          if (kind === 'lock') await locks.withLock(key, () => undefined);
          else await locks.withSemaphore(key, SEMAPHORE_LIMIT, () => undefined);
        }
        perOp[kind].push((hostNow() - started) / config.opsPerRound);
      }
      log(`  semaphore uncontended round ${round + 1}: lock ${perOp.lock.at(-1)!.toFixed(3)} ms, semaphore ${perOp.semaphore.at(-1)!.toFixed(3)} ms`);
    }
  } finally {
    await app.close();
  }
  const workers = await LockWorker.startMany(config.processes, { settings: db.settings, options: { janitor: false } });
  const rate = { lock: [] as number[], semaphore: [] as number[] };
  try {
    for (let round = 0; round < config.rounds; round++) {
      for (const kind of ['lock', 'semaphore'] as const) {
        const args: SemaphoreLoadArgs = {
          key: `bench-sem-contended-${kind}`,
          limit: kind === 'lock' ? 0 : SEMAPHORE_LIMIT,
          callers: config.callersPerProcess,
          windowMs: config.contentionWindowMs,
          workMs: SEMAPHORE_WORK_MS,
        };
        const done = await Promise.all(workers.map((w) => w.run<number>(SCENARIO, 'semaphoreLoad', args)));
        rate[kind].push((done.reduce((a, b) => a + b, 0) / config.contentionWindowMs) * 1000);
      }
      log(`  semaphore contended round ${round + 1}: lock ${rate.lock.at(-1)!.toFixed(1)}/s, semaphore ${rate.semaphore.at(-1)!.toFixed(1)}/s`);
    }
  } finally {
    await Promise.all(workers.map((w) => w.close()));
  }
  return {
    uncontended: { lock: figure(perOp.lock), semaphore: figure(perOp.semaphore) },
    contended: { lock: figure(rate.lock), semaphore: figure(rate.semaphore) },
  };
}
