import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import { DbLockError, LockTimeoutError, type LockService } from '../../lib/index.js';
import { createLockApp, eventually } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';
import { contractSuite } from '../support/contract-targets.js';

/**
 * A grant statement interrupted on the server (KILL QUERY) or cut off with its connection (KILL
 * CONNECTION) is retried within the caller's budget on a fresh connection, after giving back
 * whatever it may have committed: the caller ends with the lock, or with a typed DbLockError whose
 * cause is the driver error — never a raw driver error, never a lock it does not know about.
 */
contractSuite('interrupted-grants', 'interrupted grants', { postgres: true }, (target) => {
  let db: TestDatabase;
  let app: INestApplicationContext;
  let locks: LockService;
  let otherApp: INestApplicationContext;
  let otherLocks: LockService;
  before(async () => {
    db = await TestDatabase.forTarget(target);
    ({ app, locks } = await createLockApp(db.settings, target.options({ janitor: false })));
    ({ app: otherApp, locks: otherLocks } = await createLockApp(db.settings, target.options({ janitor: false })));
    // Key rows exist, and this process does not know the keys free (it would claim the next token with one
    // INSERT then, which no key row lock holds back).
    for (const key of ['kq', 'kc', 'kt']) await (await otherLocks.acquire(key)).release();
  });
  after(async () => {
    await app?.close();
    await otherApp?.close();
    await db?.drop();
  });

  /** Holds the key's row lock (another session's transaction) so that grants block on it; returns the release. */
  const blockGrants = (key: string): Promise<() => Promise<void>> => db.holdKeyRow(key);

  /**
   * The server threads of this database running a grant's locking statement, blocked on the row
   * lock: lease's conditional UPDATE, row-lock's locking UPDATE (`UPDATE db_lock l SET
   * fencing_token`, on a DataSource connection), or the bounded locking read MySQL sends first. On
   * PostgreSQL: the sessions waiting for a lock in a statement on the lock tables (a grant's batch).
   */
  async function grantThreads(): Promise<number[]> {
    const rows = await db.query<{ ID: number }[]>(
      db.type === 'postgres'
        ? `SELECT pid AS "ID" FROM pg_stat_activity WHERE datname = ? AND pid <> pg_backend_pid() AND wait_event_type = 'Lock' AND query LIKE '%db_lock%'`
        : `SELECT ID FROM information_schema.PROCESSLIST WHERE DB = ? AND ID <> CONNECTION_ID() ` +
            `AND (INFO LIKE '%UPDATE db_lock %SET fencing_token%' OR INFO LIKE 'SELECT /*+ MAX_EXECUTION_TIME%FROM db_lock %FOR UPDATE%')`,
      [db.name],
    );
    return rows.map((r) => Number(r.ID));
  }

  /** KILL QUERY (PostgreSQL: a cancel request) or KILL CONNECTION (PostgreSQL: the backend terminated) of a session. */
  async function kill(how: 'QUERY' | 'CONNECTION', id: number): Promise<void> {
    if (db.type !== 'postgres') return void (await db.query(`KILL ${how} ${id}`));
    await db.query(how === 'QUERY' ? 'SELECT pg_cancel_backend(?)' : 'SELECT pg_terminate_backend(?)', [id]);
  }

  for (const how of ['QUERY', 'CONNECTION'] as const) {
    it(`KILL ${how} of a grant in flight: retried within the budget, then granted`, async () => {
      const key = how === 'QUERY' ? 'kq' : 'kc';
      const unblock = await blockGrants(key);
      const started = performance.now();
      const acquiring = locks.acquire(key, { timeoutMs: 8_000 });
      let killed = 0;
      try {
        await eventually(async () => (await grantThreads()).length > 0, 5_000, 'the grant to block');
        for (const id of await grantThreads()) await kill(how, id).then(() => killed++);
        // It tries again (a fresh statement, blocked again on the same row lock).
        await eventually(async () => (await grantThreads()).length > 0, 5_000, 'the grant to be retried');
      } finally {
        await unblock();
      }
      const lock = await acquiring;
      assert.ok(killed >= 1);
      assert.ok(performance.now() - started < 8_000);
      assert.equal(lock.fencingToken, 2, 'granted once: the interrupted try committed nothing');
      await lock.release();
      const rows = await db.logRows(key);
      assert.deepEqual(
        rows.map((r) => r.status),
        ['RELEASED', 'RELEASED'],
        'no stray live row from the killed try',
      );
    });
  }

  it('interrupted again and again until the budget runs out: LockTimeoutError with the driver error as cause', async () => {
    const unblock = await blockGrants('kt');
    const acquiring = locks.acquire('kt', { timeoutMs: 1_500 }).then(
      () => undefined,
      (error: unknown) => error,
    );
    let done = false;
    void acquiring.then(() => (done = true));
    try {
      while (!done) {
        for (const id of await grantThreads()) await kill('QUERY', id).catch(() => undefined);
        await new Promise((r) => setTimeout(r, 20));
      }
    } finally {
      await unblock();
    }
    const error = await acquiring;
    assert.ok(error instanceof DbLockError, `typed, got ${String(error)}`);
    assert.ok(error instanceof LockTimeoutError, `a timeout, got ${String((error as Error).name)}`);
    // The last try's failure: the driver's error of a killed statement, or the statement cut at the deadline.
    assert.ok(error.cause instanceof Error, `a cause, got ${String(error.cause)}`);
    assert.equal(locks.stats().held, 0);
    assert.deepEqual(
      (await db.logRows('kt')).map((r) => r.status),
      ['RELEASED'],
      'nothing granted by any interrupted try',
    );
  });
});
