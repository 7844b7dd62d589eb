import type { LockMode } from '../core/lock-mode.js';
import { DbLockError } from './db-lock.error.js';

/** The lock could not be had within the caller's wait budget (`timeoutMs`). */
export class LockTimeoutError extends DbLockError {
  constructor(
    /** The keys asked for, as the caller gave them (without the namespace). */
    readonly keys: readonly string[],
    /** The mode asked for. */
    readonly mode: LockMode,
    /** How long the caller waited, in milliseconds (monotonic clock). */
    readonly waitedMs: number,
    /** The wait budget, in ms. */
    readonly timeoutMs: number,
    options?: { cause?: unknown },
  ) {
    super(`Could not acquire ${mode} lock on ${formatKeys(keys)} within ${timeoutMs} ms (waited ${Math.round(waitedMs)} ms)`, options);
  }

  /** The first key asked for: the whole story for single-key locks. */
  get key(): string {
    return this.keys[0] ?? '';
  }
}

export function formatKeys(keys: readonly string[]): string {
  return keys.length === 1 ? `'${keys[0]}'` : `[${keys.map((k) => `'${k}'`).join(', ')}]`;
}
