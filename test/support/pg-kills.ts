import type { TestDatabase } from './test-database.js';
import { eventually } from './lock-app.js';
import { outcome } from './settled.js';

/** How a waiting backend is interrupted: its statement cancelled (57014), or its session terminated. */
export type PgKill = 'cancel' | 'terminate';

/**
 * Backends of `db`'s database, other than the asking session and `exceptPid` (a test's blocker),
 * waiting on a lock in a statement like `like` (a LIKE pattern on its text).
 */
export async function lockWaiters(db: TestDatabase, exceptPid: number, like = '%db_lock%'): Promise<number[]> {
  const rows = await db.query<{ pid: number }[]>(
    `SELECT pid FROM pg_stat_activity WHERE datname = ? AND pid <> pg_backend_pid() AND pid <> ? AND wait_event_type = 'Lock' AND query LIKE ?`,
    [db.name, exceptPid, like],
  );
  return rows.map((r) => Number(r.pid));
}

/**
 * Runs `call` and interrupts every backend `waiters()` lists, every 20 ms, until the call settles
 * or `forMs` passes (with `firstWaiter`, counted from when a waiter is first seen, waited for up to
 * 5 s, unless the call settled first). `killed` counts the signals that reached a backend (pg_*_backend answered
 * true), so a call that never waited cannot pass as killed. Answers the call's outcome (not yet
 * awaited: the caller lets go of what holds it first) and the count so far.
 */
export async function killWhileRunning<T>(
  db: TestDatabase,
  kill: PgKill,
  waiters: () => Promise<number[]>,
  call: () => Promise<T>,
  forMs: number,
  firstWaiter = false,
): Promise<{ running: Promise<{ value?: T; error?: unknown }>; killed: number; startedAt: number }> {
  const running = outcome(call());
  let done = false;
  void running.then(() => (done = true));
  const startedAt = performance.now();
  if (firstWaiter) await eventually(async () => done || (await waiters()).length > 0, 5_000, 'a waiting statement');
  let killed = 0;
  while (!done && performance.now() - startedAt < forMs) {
    for (const pid of await waiters()) {
      const [row] = await db.query<{ ok: boolean }[]>(`SELECT pg_${kill}_backend(?) AS ok`, [pid]);
      if (row?.ok === true) killed++;
    }
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return { running, killed, startedAt };
}
