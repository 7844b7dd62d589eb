import 'reflect-metadata';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { createLockApp, eventually } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';

/**
 * operations.md, graceful shutdown: "Afterwards the library has no timer, socket or connection
 * left open"; a row-lock still held "is its open transaction: its session is cut and the server
 * rolls it back". Here the holder's work has a statement in flight (SELECT SLEEP(3)) when
 * app.close() gives up on it (shutdownTimeoutMs 100): the session must not outlive close().
 */
describe('no session of a cut row-lock holder outlives app.close()', () => {
  let db: TestDatabase;
  before(async () => {
    db = await TestDatabase.create();
  });
  after(async () => {
    await db?.drop();
  });

  it('a row-lock holder mid-statement at shutdown leaves no session (and no row lock) once close() resolved', async () => {
    const { app, locks } = await createLockApp(db.settings, { strategy: 'row-lock', shutdownTimeoutMs: 100, janitor: false });
    let started = false;
    const work = locks
      .runLocked('shut:1', async () => {
        started = true;
        await locks.manager.query('SELECT SLEEP(3)');
      })
      .catch((e: unknown) => e);
    await eventually(() => started, 5_000, 'the work started');
    await sleep(100);
    const t0 = performance.now();
    await app.close();
    const closeMs = Math.round(performance.now() - t0);
    await work;
    await sleep(200);
    const left = await db.query<{ id: number; command: string; info: string | null; time: number }[]>(
      'SELECT id, command, info, time FROM information_schema.PROCESSLIST WHERE db = ? AND id <> CONNECTION_ID()',
      [db.name],
    );
    // The key row, as another process's take would lock it (NOWAIT: refused at once if a session still holds it).
    const other = await db.session();
    const keyRowLock = await other.query('SELECT fencing_token FROM db_lock WHERE lock_key = ? FOR UPDATE NOWAIT', [Buffer.from('shut:1')]).then(
      () => 'free',
      (e: Error) => `still locked (${e.message})`,
    );
    await other.query('ROLLBACK');
    assert.deepEqual(
      left,
      [],
      `key row after close: ${keyRowLock}. app.close() resolved after ${closeMs} ms, yet 200 ms later the server still runs the cut holder's session (its transaction and row lock with it): ${JSON.stringify(left)}`,
    );
  });
});
