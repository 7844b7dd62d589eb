import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import type { DataSource } from 'typeorm';
import { LockStatementError } from '../../lib/store/lock-statement.error.js';
import { PgLockPool, pgPoolConfig } from '../../lib/store/postgres/pg-pool.js';
import { PgTestDatabase, pgTestsRun } from '../support/pg-test-database.js';

/** Marks the statement whose connection the test drops while the server runs it. */
const DROP_ME = '/* drop-me */';

/**
 * The library's own pool on PostgreSQL when a connection drops under a statement with no word from
 * the server (a network cut, a proxy that went away): pg emits 'error' on the checked-out client,
 * which its pool no longer listens to, and an 'error' with no listener is an uncaught exception
 * that ends the app (the test runner fails the test on one). The statement must fail as a lost
 * connection instead, and the pool go on with a fresh connection.
 */
describe("the library's PostgreSQL pool: a connection dropped mid-statement", { skip: (await pgTestsRun()) ? false : 'no PostgreSQL server' }, () => {
  let db: PgTestDatabase;
  let dataSource: DataSource;
  let pool: PgLockPool;
  const query = pg.Client.prototype.query;

  before(async () => {
    db = await PgTestDatabase.create('dblock_pg_pool_drop');
    dataSource = await db.dataSource();
    pool = new PgLockPool(pgPoolConfig(dataSource, 1)); // one connection: the next query must get a new one
    // The socket under a marked statement is destroyed once the server runs it (pg_sleep).
    (pg.Client.prototype as unknown as { query: typeof query }).query = function (this: pg.Client, ...args: unknown[]) {
      const first = args[0] as string | { text?: string };
      const text = typeof first === 'string' ? first : String(first.text);
      if (text.startsWith(DROP_ME)) {
        const stream = (this as unknown as { connection: { stream: { destroy(): void } } }).connection.stream;
        setTimeout(() => stream.destroy(), 100);
      }
      return (query as (...a: unknown[]) => unknown).apply(this, args);
    } as typeof query;
  });
  after(async () => {
    pg.Client.prototype.query = query;
    await pool?.close();
    await db?.drop();
  });

  it('fails the statement as a lost connection, crashes nothing, and serves the next one on a new connection', async () => {
    const before = ((await pool.query('SELECT pg_backend_pid() AS pid', 'admin'))[0]!.rows[0] as { pid: number }).pid;
    const started = performance.now();
    const failure = await pool.query(`${DROP_ME} SELECT pg_sleep(5)`, 'admin').catch((error: unknown) => error);
    assert.ok(failure instanceof LockStatementError, String(failure));
    assert.equal(failure.kind, 'connection-lost');
    assert.ok(performance.now() - started < 4_000, 'failed when the connection dropped, not when the statement would have ended');
    // Let pg's 'error' and 'end' events of the dropped client run (an uncaught one fails this test).
    await new Promise((resolve) => setTimeout(resolve, 200));
    const after = ((await pool.query('SELECT pg_backend_pid() AS pid', 'admin'))[0]!.rows[0] as { pid: number }).pid;
    assert.notEqual(after, before, 'the dropped connection went back to the pool');
  });
});
