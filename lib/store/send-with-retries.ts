import { setTimeout as sleep } from 'node:timers/promises';
import { LockStatementError } from './lock-statement.error.js';

/**
 * Sends again after transient failures (deadlocks, lock-wait timeouts, killed statements) and
 * broken or refused connections, with growing jitter, until `forMs` have passed or the pool closed.
 * For idempotent statements only: releases, extends, renewals, key rows, janitor and admin work.
 */
export async function sendWithRetries<T>(send: () => Promise<T>, forMs: number, closed: () => boolean, firstFailure?: unknown): Promise<T> {
  const giveUpAt = performance.now() + forMs;
  // `firstFailure`: the caller's own first send failed (handled in its callback); the retries follow from here.
  let error = firstFailure;
  for (let attempt = 1; ; attempt++) {
    if (error === undefined) {
      try {
        return await send();
      } catch (sendError) {
        error = sendError;
      }
    }
    const failure = LockStatementError.from(error);
    const retriable =
      failure.kind === 'retry' || failure.kind === 'connection-lost' || failure.kind === 'unreachable' || failure.kind === 'interrupted';
    if (!retriable || performance.now() >= giveUpAt || closed()) throw failure;
    await sleep(2 + Math.random() * Math.min(20 * attempt, 200));
    error = undefined;
  }
}
