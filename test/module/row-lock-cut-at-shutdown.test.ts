import 'reflect-metadata';
import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { createLockApp, eventually } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';
import { contractSuite } from '../support/contract-targets.js';

/**
 * operations.md, graceful shutdown: "Afterwards the library has no timer, socket or connection
 * left open"; a row-lock still held "is its open transaction: its session is cut and the server
 * rolls it back". Here the holder's work has a statement in flight (a 3 s server-side sleep) when
 * app.close() gives up on it (shutdownTimeoutMs 100): the session must not outlive close().
 */
contractSuite('holder-connection', 'no session of a cut row-lock holder outlives app.close()', { postgres: true }, (target) => {
  let db: TestDatabase;
  before(async () => {
    db = await TestDatabase.forTarget(target);
  });
  after(async () => {
    await db?.drop();
  });

  /** The database's other sessions, with what each is doing (PostgreSQL: client backends only, autovacuum workers show a database too). */
  const sessionsLeft = () =>
    db.query<{ id: number; command: string; info: string | null; time: number }[]>(
      db.type === 'postgres'
        ? 'SELECT pid AS id, state AS command, query AS info, EXTRACT(EPOCH FROM clock_timestamp() - query_start) AS time ' +
            "FROM pg_stat_activity WHERE datname = ? AND backend_type = 'client backend' AND pid <> pg_backend_pid()"
        : 'SELECT id, command, info, time FROM information_schema.PROCESSLIST WHERE db = ? AND id <> CONNECTION_ID()',
      [db.name],
    );

  /** The key row, as another process's take would lock it (NOWAIT: refused at once if a session still holds it). */
  const keyRowLock = async (storedKey: string): Promise<string> => {
    const lockIt = 'SELECT fencing_token FROM db_lock WHERE lock_key = ? FOR UPDATE NOWAIT';
    const outcome = (p: Promise<unknown>) =>
      p.then(
        () => 'free',
        (e: Error) => `still locked (${e.message})`,
      );
    if (db.type === 'postgres') {
      await db.query('BEGIN');
      try {
        return await outcome(db.query(lockIt, [Buffer.from(storedKey)]));
      } finally {
        await db.query('ROLLBACK');
      }
    }
    const other = await db.session();
    try {
      return await outcome(other.query(lockIt, [Buffer.from(storedKey)]));
    } finally {
      await other.query('ROLLBACK');
    }
  };

  it('a row-lock holder mid-statement at shutdown leaves no session (and no row lock) once close() resolved', { timeout: 30_000 }, async () => {
    const { app, locks } = await createLockApp(db.settings, target.options({ shutdownTimeoutMs: 100, janitor: false }));
    let started = false;
    const work = locks
      .runLocked('shut:1', async () => {
        started = true;
        await locks.manager.query(db.type === 'postgres' ? 'SELECT pg_sleep(3)' : 'SELECT SLEEP(3)');
      })
      .catch((e: unknown) => e);
    await eventually(() => started, 5_000, 'the work started');
    await sleep(100);
    const t0 = performance.now();
    await app.close();
    const closeMs = Math.round(performance.now() - t0);
    await work;
    await sleep(200);
    const left = await sessionsLeft();
    const keyRow = await keyRowLock('shut:1');
    assert.deepEqual(
      left,
      [],
      `key row after close: ${keyRow}. app.close() resolved after ${closeMs} ms, yet 200 ms later the server still runs the cut holder's session (its transaction and row lock with it): ${JSON.stringify(left)}`,
    );
  });
});
