import { setTimeout as sleep } from 'node:timers/promises';
import { LockStatementError } from '../lock-statement.error.js';

/**
 * Sends again after transient failures (deadlocks, lock-wait timeouts, killed statements) and
 * broken or refused connections, with growing jitter, until `forMs` have passed or the pool closed.
 * For idempotent statements only: releases, extends, renewals, key rows, janitor and admin work.
 */
export async function sendWithRetries<T>(send: () => Promise<T>, forMs: number, closed: () => boolean): Promise<T> {
  const giveUpAt = performance.now() + forMs;
  for (let attempt = 1; ; attempt++) {
    try {
      return await send();
    } catch (error) {
      const failure = LockStatementError.from(error);
      const retriable =
        failure.kind === 'retry' || failure.kind === 'connection-lost' || failure.kind === 'unreachable' || failure.kind === 'interrupted';
      if (!retriable || performance.now() >= giveUpAt || closed()) throw failure;
      await sleep(2 + Math.random() * Math.min(20 * attempt, 200));
    }
  }
}
