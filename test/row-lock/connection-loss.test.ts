import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import { LockLostError, type LockService } from '../../lib/index.js';
import { createLockApp, eventually } from '../support/lock-app.js';
import { killSession, sessionIdSql } from '../support/server-sessions.js';
import { runSql } from '../support/portable-sql.js';
import { TestDatabase } from '../support/test-database.js';
import { contractSuite } from '../support/contract-targets.js';

/**
 * A row-lock is its holder's open transaction: when that connection dies (killed by an operator,
 * wait_timeout, a network cut), the server rolls the work back and hands the key over at once.
 * The holder must learn it the same way it learns any lost lock: its signal aborts and its next
 * statement or its commit fails with LockLostError (the driver error as cause), never with a raw
 * driver or ORM error, and none of its writes exist.
 */
contractSuite('holder-connection', 'row-lock: the holder connection dies mid-work', { postgres: true }, (target) => {
  let db: TestDatabase;
  let app: INestApplicationContext;
  let locks: LockService;
  let other: { app: INestApplicationContext; locks: LockService };

  before(async () => {
    db = await TestDatabase.forTarget(target);
    await db.query(`CREATE TABLE account (id INT PRIMARY KEY, balance INT NOT NULL)${db.sql.tableOptions}`);
    await db.query('INSERT INTO account VALUES (1, 100), (2, 100)');
    ({ app, locks } = await createLockApp(db.settings, {
      strategy: 'row-lock',
      leaseMs: 30_000,
    }));
    other = await createLockApp(db.settings, {
      strategy: 'row-lock',
      leaseMs: 30_000,
    });
  });
  after(async () => {
    await app?.close();
    await other?.app.close();
    await db?.drop();
  });

  for (const statementAfterKill of [true, false]) {
    it(`${statementAfterKill ? 'the next statement' : 'the commit'} fails with LockLostError; nothing committed; the key is free at once`, async () => {
      const key = `acct:${statementAfterKill ? 1 : 2}`;
      const id = statementAfterKill ? 1 : 2;
      let signal: AbortSignal | undefined;
      const started = performance.now();
      const outcome = await locks
        .runLocked(key, async () => {
          const manager = locks.manager;
          signal = locks.currentLock!.signal;
          await runSql(manager, 'UPDATE account SET balance = 0 WHERE id = ?', [id]);
          const [connection] = (await manager.query(sessionIdSql(db))) as { id: number }[];
          await killSession(db, Number(connection!.id));
          if (statementAfterKill) await runSql(manager, 'UPDATE account SET balance = 1 WHERE id = ?', [id]);
        })
        .then(
          () => undefined,
          (error: unknown) => error,
        );
      assert.ok(outcome instanceof LockLostError, `expected LockLostError, got ${String(outcome)}`);
      // The failed statement is kept as cause; a commit finds the loss already known (the
      // connection's end event aborted the signal), and says so.
      if (statementAfterKill) assert.ok(outcome.cause !== undefined, 'the failed statement is kept as cause');
      assert.match(outcome.message, /connection closed/);
      assert.equal(signal?.aborted, true, 'the holder signal aborted');
      const [row] = await db.query<{ balance: number }[]>('SELECT balance FROM account WHERE id = ?', [id]);
      assert.equal(Number(row!.balance), 100, 'the dead holder work was rolled back');
      // Free at once, not after the 30 s lease: the next holder gets it with one try.
      const next = await other.locks.tryAcquire(key);
      assert.ok(next, 'the key was not free at once');
      assert.ok(performance.now() - started < 10_000);
      await next.release();
      // The audit trail: the dead holder's audit row went with its rollback; its own process
      // writes a terminal row after it (FAILED or EXPIRED, off the caller's path). Its token bump
      // rolled back too, so the next holder, the first to commit, gets the same token 1.
      await eventually(async () => (await db.logRows(key)).length === 2, 5_000, 'the dead holder terminal row');
      const rows = await db.logRows(key);
      const dead = rows.find((r) => r.status !== 'RELEASED');
      const committed = rows.find((r) => r.status === 'RELEASED');
      assert.ok(dead && ['FAILED', 'EXPIRED'].includes(String(dead.status)), `dead holder row ${String(dead?.status)}`);
      assert.ok(committed, 'the next holder row');
      assert.equal(Number(dead.fencing_token), 1);
      assert.equal(Number(committed.fencing_token), 1, 'a token that never committed is handed out again');
    });
  }
});
