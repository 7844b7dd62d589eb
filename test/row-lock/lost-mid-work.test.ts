import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import type { INestApplicationContext } from '@nestjs/common';
import { LockLostError, type LockService } from '../../lib/index.js';
import { createLockApp } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';

/**
 * A row-lock holder whose lock is lost while its work runs (here: its event loop blocked past the
 * lease, so its local deadline passes) must not commit anything its work sends afterwards. Rolling
 * the transaction back under the running work would let the work's next statement run in
 * autocommit on the same connection and commit outside any lock; the transaction is abandoned
 * instead (the runner refuses further statements, the connection is destroyed).
 */
describe('row-lock: lost while the work runs', () => {
  let db: TestDatabase;
  let app: INestApplicationContext;
  let locks: LockService;
  before(async () => {
    db = await TestDatabase.create();
    await db.query('CREATE TABLE after_loss (id INT AUTO_INCREMENT PRIMARY KEY, note VARCHAR(32)) ENGINE=InnoDB');
    ({ app, locks } = await createLockApp(db.settings, { strategy: 'row-lock', leaseMs: 300, escapedWrites: 'ignore' }));
  });
  after(async () => {
    await app?.close();
    await db?.drop();
  });

  it('statements sent after the loss never commit, and the call ends with LockLostError', async () => {
    const outcome = await locks
      .runLocked('busy-worker', async () => {
        const manager = locks.manager;
        await manager.query("INSERT INTO after_loss (note) VALUES ('before')");
        const until = performance.now() + 900; // three leases, event loop blocked: no renewal
        while (performance.now() < until) {
          /* busy */
        }
        await sleep(1); // the overdue local deadline fires first: the lock is lost
        await manager.query("INSERT INTO after_loss (note) VALUES ('after')");
      })
      .then(
        () => undefined,
        (error: unknown) => error,
      );
    assert.ok(outcome instanceof LockLostError, `expected LockLostError, got ${String(outcome)}`);
    await sleep(200);
    assert.deepEqual(await db.query('SELECT note FROM after_loss'), [], 'nothing of the lost holder committed');
    const [open] = await db.query<{ n: number }[]>(
      'SELECT COUNT(*) AS n FROM information_schema.INNODB_TRX t JOIN information_schema.PROCESSLIST p ON p.id = t.trx_mysql_thread_id WHERE p.db = ?',
      [db.name],
    );
    assert.equal(Number(open!.n), 0, 'no transaction left open');
  });
});
