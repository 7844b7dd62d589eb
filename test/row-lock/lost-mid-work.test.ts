import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import type { INestApplicationContext } from '@nestjs/common';
import { LockLostError, type LockService } from '../../lib/index.js';
import { createLockApp, eventually } from '../support/lock-app.js';
import { runSql } from '../support/portable-sql.js';
import { TestDatabase } from '../support/test-database.js';
import { contractSuite } from '../support/contract-targets.js';

/**
 * A row-lock is its open transaction: no lease, no local deadline. A holder whose event loop is
 * blocked far past the lease length the module is configured with keeps its lock and commits
 * everything its work sent. The one local bound is maxHoldMs: a hold past it is lost while its
 * work may still run, and nothing that work sends afterwards may commit. Rolling the transaction
 * back under the running work would let the work's next statement run in autocommit on the same
 * connection; the transaction is abandoned instead (the runner refuses further statements, the
 * connection is destroyed).
 */
contractSuite('holder-connection', 'row-lock: a long hold, and one lost at maxHoldMs while the work runs', { postgres: true }, (target) => {
  let db: TestDatabase;
  let app: INestApplicationContext;
  let locks: LockService;
  let bounded: { app: INestApplicationContext; locks: LockService };
  before(async () => {
    db = await TestDatabase.forTarget(target);
    await db.query(`CREATE TABLE after_loss (id ${db.sql.autoId}, note VARCHAR(32))${db.sql.tableOptions}`);
    ({ app, locks } = await createLockApp(db.settings, { strategy: 'row-lock', leaseMs: 300, escapedWrites: 'ignore' }));
    bounded = await createLockApp(db.settings, { strategy: 'row-lock', leaseMs: 300, maxHoldMs: 300, escapedWrites: 'ignore' });
  });
  after(async () => {
    await app?.close();
    await bounded?.app.close();
    await db?.drop();
  });

  const blockedWork = (service: LockService, tag: string) => async () => {
    const manager = service.manager;
    await runSql(manager, 'INSERT INTO after_loss (note) VALUES (?)', [`${tag}:before`]);
    const until = performance.now() + 900; // three times the lease, event loop blocked: no timer runs
    while (performance.now() < until) {
      /* busy */
    }
    await sleep(1); // any overdue timer fires first
    await runSql(manager, 'INSERT INTO after_loss (note) VALUES (?)', [`${tag}:after`]);
  };

  it('a holder blocked three times past the lease length keeps its lock and commits all of its work', async () => {
    let signal: AbortSignal | undefined;
    await locks.runLocked('long-worker', async () => {
      signal = locks.currentLock!.signal;
      await blockedWork(locks, 'long')();
    });
    assert.equal(signal?.aborted, false, 'the signal never aborted');
    assert.deepEqual(
      (await db.query<{ note: string }[]>("SELECT note FROM after_loss WHERE note LIKE 'long:%' ORDER BY id")).map((r) => r.note),
      ['long:before', 'long:after'],
    );
    assert.deepEqual(
      (await db.logRows('long-worker')).map((r) => r.status),
      ['RELEASED'],
    );
  });

  it('past maxHoldMs: statements sent after the loss never commit, and the call ends with LockLostError', async () => {
    const outcome = await bounded.locks.runLocked('busy-worker', blockedWork(bounded.locks, 'bounded')).then(
      () => undefined,
      (error: unknown) => error,
    );
    assert.ok(outcome instanceof LockLostError, `expected LockLostError, got ${String(outcome)}`);
    assert.match(outcome.message, /maxHoldMs/);
    await eventually(async () => (await db.logRows('busy-worker')).length === 1, 5_000, 'the terminal row of the lost hold');
    assert.deepEqual(await db.query("SELECT note FROM after_loss WHERE note LIKE 'bounded:%'"), [], 'nothing of the lost holder committed');
    assert.equal((await db.logRows('busy-worker'))[0]!.status, 'EXPIRED');
    // The cut connection's transaction is rolled back by the server once it sees the socket close.
    await eventually(async () => (await db.openTransactions()).length === 0, 5_000, 'no transaction left open');
  });

  it("past maxHoldMs while the work awaits a statement on the lock's connection: that statement fails at once, it never hangs", async (t) => {
    // The statement is in flight when the hold is cut: closing the connection must fail it (a
    // connection closed by mysql2's destroy() would leave it unanswered, the work awaiting forever).
    const started = performance.now();
    const call = bounded.locks.runLocked('mid-statement', async () => {
      await bounded.locks.manager.query("INSERT INTO after_loss (note) VALUES ('mid:before')");
      await bounded.locks.manager.query(db.type === 'postgres' ? 'SELECT pg_sleep(30)' : 'SELECT SLEEP(30)');
      await bounded.locks.manager.query("INSERT INTO after_loss (note) VALUES ('mid:after')");
    });
    const settled = await Promise.race([
      call.then(
        () => 'returned',
        (error: unknown) => error,
      ),
      sleep(10_000).then(() => 'still waiting after 10 s'),
    ]);
    const elapsed = performance.now() - started;
    t.diagnostic(`ended after ${Math.round(elapsed)} ms`);
    assert.ok(settled instanceof LockLostError, `expected LockLostError, got ${String(settled)}`);
    assert.match(settled.message, /maxHoldMs/);
    // maxHoldMs is 300 ms and the statement fails as its connection closes (about 310 ms here);
    // 3 s bound for a loaded machine. Closed with mysql2's destroy(), the call ended after 5 s.
    assert.ok(elapsed < 3_000, `the call ended after ${Math.round(elapsed)} ms`);
    assert.deepEqual(await db.query("SELECT note FROM after_loss WHERE note LIKE 'mid:%'"), [], 'nothing of the cut hold committed');
  });
});
