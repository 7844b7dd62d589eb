import type { QueryRunner } from 'typeorm';
import { LockStatementError } from '../store/lock-statement.error.js';
import { deadlines } from './deadline-watch.js';
import { checkoutBound, dataSourcePool } from './connection-opening.js';

const GAVE_UP = "No connection of the app's DataSource came free within the caller's budget";

/** Always allowed for the connection, whatever is left of the budget: opening one on a cold pool is not waiting (a single try must not fail for it). */
export const CONNECT_GRACE_MS = 250;

/**
 * Connects `runner` by `deadline` (performance.now(); Infinity: no bound) unless `shutdown` aborts first, or within
 * CONNECT_GRACE_MS if that is later, or within OPEN_BOUND_MS when the pool opens a connection for it. TypeORM waits for a pool connection as long as the app's own
 * work holds them all; a caller's budget must still end its wait (LockStatementError 'deadline', a
 * timeout to the caller). The runner is then released here once its connection arrives (TypeORM
 * gives back nothing when released before that): the caller must not release it too, or the
 * connection would go back to the pool twice.
 */
export function connectWithin(runner: QueryRunner, deadline: number, shutdown?: AbortSignal): Promise<void> {
  // Asked before the connect: the pool's counters say whether this checkout opens a connection.
  const bound = deadline === Infinity ? Infinity : checkoutBound(dataSourcePool(runner.connection), deadline, CONNECT_GRACE_MS).bound;
  const connecting = runner.connect();
  if (deadline === Infinity && !shutdown) return connecting.then(() => undefined);
  // One promise settled by whichever comes first (no Promise.race): this runs on every row-lock hold.
  return new Promise<void>((resolve, reject) => {
    let gaveUp = false;
    const giveUp = (error: LockStatementError): void => {
      if (gaveUp) return;
      gaveUp = true;
      reject(error);
    };
    const stopped = (): void => giveUp(LockStatementError.notSent('The lock service is shutting down'));
    const watched = deadline === Infinity ? undefined : deadlines.watch(bound, () => giveUp(LockStatementError.deadline(GAVE_UP)));
    shutdown?.addEventListener('abort', stopped, { once: true });
    const settled = (): void => {
      watched?.cancel();
      shutdown?.removeEventListener('abort', stopped);
    };
    connecting.then(
      () => {
        settled();
        if (gaveUp) void runner.release().catch(() => undefined);
        else resolve();
      },
      (error: unknown) => {
        settled();
        if (!gaveUp) reject(error);
      },
    );
  });
}
