import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import type { LockService } from '../../lib/index.js';
import { bellName } from '../../lib/store/mysql/doorbells.js';
import { TestDatabase } from '../support/test-database.js';
import { createLockApp, eventually } from '../support/lock-app.js';
import { contractSuite } from '../support/contract-targets.js';

/**
 * A waiter's grant goes in one batch behind its doorbell wait, so when a statement after the wait
 * fails (here a deadlock, injected once by a trigger on the log row's insert) the session may already hold
 * the bell, and the wait's result is lost with the batch. Once the grant is tried again, that
 * session must not go back to the pool: a pooled connection holding a bell passes the bell test of
 * every grant sent through it, and keeps every other process's wait on that bell running out, one
 * second at a time.
 */
contractSuite('lease-mechanics', 'a failed batch after a doorbell wait', (target) => {
  const KEY = 'bell:batch-failure';
  let db: TestDatabase;
  const apps: INestApplicationContext[] = [];
  let first: LockService;
  let second: LockService;

  before(async () => {
    db = await TestDatabase.create();
    const a = await createLockApp(db.settings, { ...target.options(), janitor: false });
    const b = await createLockApp(db.settings, { ...target.options(), janitor: false });
    apps.push(a.app, b.app);
    first = a.locks;
    second = b.locks;
    // Not transactional, so the trigger's count survives the rollback of the statement it fails.
    await db.query('CREATE TABLE inject_deadlock (n INT NOT NULL) ENGINE=MEMORY');
    await db.query('INSERT INTO inject_deadlock VALUES (0)');
    await db.query(
      `CREATE TRIGGER inject_deadlock_bi BEFORE INSERT ON db_lock_log FOR EACH ROW BEGIN
         IF NEW.lock_key = ? AND (SELECT n FROM inject_deadlock) > 0 THEN
           UPDATE inject_deadlock SET n = n - 1;
           SIGNAL SQLSTATE '40001' SET MYSQL_ERRNO = 1213, MESSAGE_TEXT = 'injected deadlock';
         END IF;
       END`,
      [Buffer.from(KEY)],
    );
  });
  after(async () => {
    for (const app of apps) await app.close();
    await db.drop();
  });

  const bellHolder = async () =>
    (await db.query<{ holder: number | null }[]>('SELECT IS_USED_LOCK(?) AS holder', [bellName(db.name, KEY)]))[0]!.holder;
  /** A session of this database waits in GET_LOCK on this key's bell (other tests' bells do not count). */
  const parkedOnBell = async () =>
    Number(
      (
        await db.query<{ n: number }[]>(
          "SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST WHERE DB = ? AND STATE = 'User lock' AND INSTR(INFO, ?) > 0",
          [db.name, bellName(db.name, KEY)],
        )
      )[0]!.n,
    ) > 0;

  it('is tried again, and no pooled connection is left holding the bell', async () => {
    // `first` comes to hold the key through the bell: refused while `second` holds it, then granted.
    const blocker = await second.acquire(KEY);
    const firstHolds = first.acquire(KEY, { timeoutMs: 10_000 });
    await eventually(async () => (await bellHolder()) !== null, 5_000, 'the refused writer to take the bell');
    await blocker.release();
    const held = await firstHolds;
    assert.notEqual(await bellHolder(), null, 'the holder keeps the bell through its hold');

    // `second` waits on that bell; its grant, sent behind the wait, meets the injected deadlock once.
    const secondHolds = second.acquire(KEY, { timeoutMs: 10_000 });
    await eventually(parkedOnBell, 5_000, 'the second writer to wait on the bell');
    await db.query('UPDATE inject_deadlock SET n = 1');
    await held.release();
    const next = await secondHolds;
    assert.equal(Number((await db.query<{ n: number }[]>('SELECT n FROM inject_deadlock'))[0]!.n), 0, 'the deadlock was injected into the grant');
    await next.release();

    assert.equal(await bellHolder(), null, 'no session holds the bell once nobody holds or waits for the key');
    const again = await first.acquire(KEY, { timeoutMs: 2_000 });
    await again.release();
  });
});
