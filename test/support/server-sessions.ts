import assert from 'node:assert/strict';
import type pg from 'pg';
import type { DataSource } from 'typeorm';
import type { LockService } from '../../lib/index.js';
import type { PgLockLog } from '../../lib/store/postgres/pg-lock-log.js';
import { mysqlLogOf, partsOf } from './lock-internals.js';
import type { TestDatabase } from './test-database.js';
import type { OpenTransaction } from './open-transactions.js';
import { eventually } from './lock-app.js';

/**
 * The server sessions of a test database, and the connections of an app's pools, on either server:
 * MySQL's KILL, CONNECTION_ID() and information_schema.PROCESSLIST; PostgreSQL's
 * pg_terminate_backend, pg_backend_pid() and pg_stat_activity (client backends only: autovacuum
 * workers also show a database).
 */

/** The asking session's own id (a row `{ id }`). */
export function sessionIdSql(db: TestDatabase): string {
  return db.type === 'postgres' ? 'SELECT pg_backend_pid() AS id' : 'SELECT CONNECTION_ID() AS id';
}

/** Ends another session of the server (its transaction rolled back, its connection cut). */
export async function killSession(db: TestDatabase, id: number): Promise<void> {
  await db.query(db.type === 'postgres' ? 'SELECT pg_terminate_backend(?)' : `KILL ${Number(id)}`, db.type === 'postgres' ? [id] : undefined);
}

/** Ids of the database's other sessions, busy or idle. */
export async function sessionIds(db: TestDatabase): Promise<number[]> {
  const rows = await db.query<{ id: number }[]>(
    db.type === 'postgres'
      ? "SELECT pid AS id FROM pg_stat_activity WHERE datname = ? AND backend_type = 'client backend' AND pid <> pg_backend_pid()"
      : 'SELECT id FROM information_schema.PROCESSLIST WHERE db = ? AND id <> CONNECTION_ID()',
    [db.name],
  );
  return rows.map((r) => Number(r.id));
}

/** How many other sessions the database has. */
export async function sessionCount(db: TestDatabase): Promise<number> {
  const [row] = await db.query<{ n: number }[]>(
    db.type === 'postgres'
      ? "SELECT COUNT(*) AS n FROM pg_stat_activity WHERE datname = ? AND backend_type = 'client backend' AND pid <> pg_backend_pid()"
      : 'SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST WHERE db = ? AND id <> CONNECTION_ID()',
    [db.name],
  );
  return Number(row!.n);
}

type Queue = { length: number; toArray(): { threadId: number }[] };
type MysqlPool = { _allConnections: Queue; _freeConnections: Queue; _connectionQueue: Queue };
type PgPool = pg.Pool & { _clients: { processID: number }[]; _idle: { client: { processID: number } }[] };

/** The server session ids of the DataSource's connections checked out of its pool. */
export function checkedOutSessionIds(dataSource: DataSource): number[] {
  if (dataSource.options.type === 'postgres') {
    const pool = (dataSource.driver as unknown as { master: PgPool }).master;
    const idle = new Set(pool._idle.map((item) => item.client.processID));
    return pool._clients.map((c) => c.processID).filter((id) => !idle.has(id));
  }
  const pool = (dataSource.driver as unknown as { pool: MysqlPool }).pool;
  const free = new Set(pool._freeConnections.toArray().map((c) => c.threadId));
  return pool._allConnections
    .toArray()
    .map((c) => c.threadId)
    .filter((id) => !free.has(id));
}

/** Busy connections: the DataSource pool (checked out, queued), the library's pools (checked out, not kept idle). */
export function busyConnections(dataSource: DataSource, locks: LockService): { appBusy: number; appQueued: number; libBusy: number } {
  if (dataSource.options.type === 'postgres') {
    const ds = (dataSource.driver as unknown as { master: pg.Pool }).master;
    const lib = ((partsOf(locks).store.log as PgLockLog).pool as unknown as { pool: pg.Pool }).pool;
    return { appBusy: ds.totalCount - ds.idleCount, appQueued: ds.waitingCount, libBusy: lib.totalCount - lib.idleCount };
  }
  const ds = (dataSource.driver as unknown as { pool: MysqlPool }).pool;
  const library = mysqlLogOf(locks).pool;
  const lib = library as unknown as { pool: MysqlPool; reserved: MysqlPool };
  // Connections the library keeps between statements are idle too, though mysql2 counts them as
  // out (a kept one the server closed has left mysql2's list already: dropped when next taken).
  const out = [lib.pool, lib.reserved].flatMap((p) => p._allConnections.toArray().filter((c) => !p._freeConnections.toArray().includes(c)));
  const kept = new Set<unknown>(library.keptConnections);
  const libBusy = out.filter((c) => !kept.has(c)).length;
  return { appBusy: ds._allConnections.length - ds._freeConnections.length, appQueued: ds._connectionQueue.length, libBusy };
}

/** Waits until the app's pools and the database are idle again (no busy or queued connection, no open transaction), else fails saying what is left. */
export async function assertIdle(db: TestDatabase, dataSource: DataSource, locks: LockService, what: string): Promise<void> {
  let last: unknown;
  let open: OpenTransaction[] = [];
  try {
    await eventually(
      async () => {
        const b = busyConnections(dataSource, locks);
        open = await db.openTransactions();
        last = { ...b, trx: open.length };
        return b.appBusy === 0 && b.appQueued === 0 && b.libBusy === 0 && open.length === 0;
      },
      3_000,
      what,
    );
  } catch {
    assert.fail(`${what}: not back to idle: ${JSON.stringify(last)}${open.map((t) => `\n${t.text}`).join('')}`);
  }
}
