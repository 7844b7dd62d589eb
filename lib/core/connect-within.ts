import type { QueryRunner } from 'typeorm';
import { LockStatementError } from '../store/lock-statement.error.js';
import { deadlines } from './deadline-watch.js';

const GAVE_UP = "No connection of the app's DataSource came free within the caller's budget";

/** Always allowed for the connection, whatever is left of the budget: opening one on a cold pool is not waiting (a single try must not fail for it). */
export const CONNECT_GRACE_MS = 250;

/**
 * Connects `runner` by `deadline` (performance.now(); Infinity: no bound), or within
 * CONNECT_GRACE_MS if that is later. TypeORM waits for a pool connection as long as the app's own
 * work holds them all; a caller's budget must still end its wait (LockStatementError 'deadline', a
 * timeout to the caller). The runner is then released here once its connection arrives (TypeORM
 * gives back nothing when released before that): the caller must not release it too, or the
 * connection would go back to the pool twice.
 */
export function connectWithin(runner: QueryRunner, deadline: number): Promise<void> {
  const connecting = runner.connect();
  if (deadline === Infinity) return connecting.then(() => undefined);
  // One promise settled by whichever comes first (no Promise.race): this runs on every row-lock hold.
  return new Promise<void>((resolve, reject) => {
    let gaveUp = false;
    const watched = deadlines.watch(Math.max(deadline, performance.now() + CONNECT_GRACE_MS), () => {
      gaveUp = true;
      reject(LockStatementError.deadline(GAVE_UP));
    });
    connecting.then(
      () => {
        watched.cancel();
        if (gaveUp) void runner.release().catch(() => undefined);
        else resolve();
      },
      (error: unknown) => {
        watched.cancel();
        if (!gaveUp) reject(error);
      },
    );
  });
}
