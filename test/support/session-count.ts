import { setTimeout as sleep } from 'node:timers/promises';
import type { TestDatabase } from './test-database.js';

/** What the tests read of a mysql2 pool: its connections' thread ids (null during the handshake). */
export type Threads = { _allConnections: { toArray(): { threadId: number | null }[] } };

/** The server thread ids of the pools' connections. */
export const threadsOf = (...pools: Threads[]): Set<number | null> =>
  new Set(pools.flatMap((p) => p._allConnections.toArray().map((c) => c.threadId)));

const SESSIONS = 'SELECT id, info, command FROM information_schema.PROCESSLIST WHERE db = ? AND id <> CONNECTION_ID()';

/**
 * Samples the test database's sessions every 2 ms until `done()`: the most the library's own pool
 * had open, and the most the app's DataSource had (every other session), with the sessions seen
 * when the latter peaked. Given the DataSource's pool (`business`), an idle (or Killed) session whose
 * connection that pool no longer has is not counted: the client closed it (a holder cut between
 * statements), and the server drops its thread a moment later.
 */
export async function watchSessions(
  db: TestDatabase,
  library: { pool: Threads; reserved: Threads },
  done: () => boolean,
  business?: Threads,
): Promise<{ mostDs: number; mostLib: number; worst: unknown }> {
  let mostDs = 0;
  let mostLib = 0;
  let worst: unknown = [];
  while (!done()) {
    const libBefore = threadsOf(library.pool, library.reserved);
    const openBefore = business && threadsOf(business);
    const sampled = await db.query<{ id: number; info: string | null; command: string }[]>(SESSIONS, [db.name]);
    const libAfter = threadsOf(library.pool, library.reserved);
    const openAfter = business && threadsOf(business);
    const closedByClient = (id: number): boolean =>
      openBefore !== undefined && openAfter !== undefined && !openBefore.has(id) && !openAfter.has(id) && !libBefore.has(id) && !libAfter.has(id);
    const rows = sampled.filter((r) => !((r.command === 'Sleep' || r.command === 'Killed') && closedByClient(Number(r.id))));
    const lib = rows.filter((r) => libBefore.has(Number(r.id)) || libAfter.has(Number(r.id)));
    // Skipped while a library connection is in its handshake (no thread id yet): it would count as the DataSource's.
    if (!libBefore.has(null) && !libAfter.has(null)) {
      const ds = rows.length - lib.length;
      if (ds > mostDs) worst = rows.map((r) => ({ ...r, lib: libBefore.has(Number(r.id)) || libAfter.has(Number(r.id)) }));
      mostDs = Math.max(mostDs, ds);
    }
    mostLib = Math.max(mostLib, lib.length);
    await sleep(2);
  }
  return { mostDs, mostLib, worst };
}

/** The test database's sessions still open `withinMs` after now (a closed connection's thread goes a moment after its QUIT). */
export async function sessionsLeft(db: TestDatabase, withinMs = 300): Promise<unknown[]> {
  let left = await db.query<unknown[]>(SESSIONS, [db.name]);
  for (const stop = performance.now() + withinMs; left.length > 0 && performance.now() < stop; await sleep(20))
    left = await db.query<unknown[]>(SESSIONS, [db.name]);
  return left;
}
