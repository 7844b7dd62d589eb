import 'reflect-metadata';
import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { DbLockError, LockLostError, type LockHandle } from '../../lib/index.js';
import { createLockApp } from '../support/lock-app.js';
import { runSql } from '../support/portable-sql.js';
import { killSession, sessionIdSql } from '../support/server-sessions.js';
import { TestDatabase } from '../support/test-database.js';
import { contractSuite } from '../support/contract-targets.js';

/**
 * A row-lock taken inside a lease call's fenced transaction (joined: README "Nested calls") is held
 * by that transaction's connection. README (Strategies, "a killed connection", row-lock column):
 * "the server rolls back and frees the key at once; the holder's signal aborts, its next statement
 * or commit fails with LockLostError". Here the connection is killed while the joined row-lock is held
 * (MySQL's KILL CONNECTION, PostgreSQL's pg_terminate_backend).
 */
contractSuite('holder-connection', 'a killed connection under a row-lock joined into a lease fenced transaction', { postgres: true }, (target) => {
  let db: TestDatabase;
  before(async () => {
    db = await TestDatabase.forTarget(target);
    await db.query(`CREATE TABLE acct (id INT PRIMARY KEY, v INT NOT NULL)${db.sql.tableOptions}`);
    await db.query('INSERT INTO acct VALUES (1, 0), (2, 0)');
  });
  after(async () => {
    await db?.drop();
  });

  for (const statementAfterKill of [true, false]) {
    it(`${statementAfterKill ? 'next statement' : 'commit'}: signal aborts and the caller gets LockLostError`, { timeout: 30_000 }, async () => {
      // The outer call must be a lease call (its fenced transaction is what the row-lock joins).
      const a = await createLockApp(db.settings, { janitor: false, strategy: 'lease' });
      const b = await createLockApp(db.settings, target.options({ janitor: false }));
      const key = `joined-${statementAfterKill}`;
      try {
        let inner: LockHandle | undefined;
        let otherGotIt = false;
        const outcome = await a.locks
          .runLocked(`outer-${statementAfterKill}`, () =>
            a.locks.runLocked(
              key,
              async (h) => {
                inner = h;
                await runSql(a.locks.manager, 'UPDATE acct SET v = 5 WHERE id = ?', [statementAfterKill ? 1 : 2]);
                const [c] = (await a.locks.manager.query(sessionIdSql(db))) as { id: number }[];
                await killSession(db, Number(c!.id));
                await new Promise((r) => setTimeout(r, 300));
                // the key is free at once (the server rolled the transaction back)
                const other = await b.locks.tryAcquire(key);
                otherGotIt = other !== null;
                await other?.release();
                if (statementAfterKill) await runSql(a.locks.manager, 'UPDATE acct SET v = 6 WHERE id = ?', [1]);
              },
              { strategy: target.strategy, timeoutMs: 3_000 },
            ),
          )
          .then(
            () => 'resolved',
            (e: unknown) => e as Error,
          );
        const name =
          typeof outcome === 'string' ? outcome : `${outcome.name}${outcome instanceof DbLockError ? '' : ' (untyped)'}: ${outcome.message}`;
        console.log(`# ${db.type}: outcome ${name}; inner signal aborted: ${inner?.signal.aborted}; other got the key: ${otherGotIt}`);
        assert.deepEqual(
          { lockLost: outcome instanceof LockLostError, innerSignalAborted: inner?.signal.aborted, otherGotIt },
          { lockLost: true, innerSignalAborted: true, otherGotIt: true },
          name,
        );
      } finally {
        await a.app.close();
        await b.app.close();
      }
    });
  }
});
