import type { PgBenchResult } from '../postgres/pg-section.js';
/** Everything a run measured, as the report reads it. Sections not run are absent. */
import type { BenchConfig } from '../config.js';
import type { ContentionResult, ContentionVariant } from '../contention.js';
import type { BenchEnvironment } from '../environment.js';
import type { HeldLocksResult, LogTableResult } from '../scale.js';
import type { SemaphoreResult } from '../semaphore.js';
import type { Figure } from '../stats.js';
import type { UncontendedResult } from '../uncontended.js';

export interface BenchResults {
  env: BenchEnvironment;
  config: BenchConfig;
  durationMs: number;
  /** 1, 5 and 15-minute load averages when the run ended. */
  loadAtEnd: number[];
  uncontended?: UncontendedResult;
  contention?: ContentionResult;
  held?: HeldLocksResult;
  logTable?: LogTableResult;
  semaphore?: SemaphoreResult;
  /** The PostgreSQL section (undefined: not run, or no server). */
  postgres?: PgBenchResult;
}

/** An uncontended item's latency figure, if the section ran. */
export function latency(r: BenchResults, id: string): Figure | undefined {
  return r.uncontended?.get(id)?.latency;
}

export function variant(r: BenchResults, pauseMs: number): ContentionVariant | undefined {
  return r.contention?.variants.find((v) => v.pauseMs === pauseMs);
}

export const variantName = (pauseMs: number): string => (pauseMs > 0 ? `callers pause ${pauseMs} ms` : 'callers re-request at once');

/** Holds per second if each hold costs two durable commits (release, next grant) and the critical section, back to back. */
export function twoCommitBound(v: ContentionVariant, commitMs: number): number {
  return 1000 / (2 * commitMs + 1000 / v.serialFloor.median);
}
