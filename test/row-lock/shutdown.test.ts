import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { DbLockError, LockLostError } from '../../lib/index.js';
import { createLockApp, eventually } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';
import { contractSuite } from '../support/contract-targets.js';

/**
 * app.close() with row-lock holders and waiters: waiting callers are rejected at once, running
 * holders get shutdownTimeoutMs, then every lock still held is given up. A row-lock holder's work
 * still running then must not have half of it committed (the lock is its transaction).
 */
contractSuite('holder-connection', 'row-lock: shutdown with holders and waiters', { postgres: true }, (target) => {
  let db: TestDatabase;
  before(async () => {
    db = await TestDatabase.forTarget(target);
    await db.query(`CREATE TABLE work (id ${db.sql.autoId}, note VARCHAR(32))${db.sql.tableOptions}`);
  });
  after(async () => {
    await db?.drop();
  });

  it('a caller waiting in the server behind a plain handle is rejected at shutdown, and app.close() does not wait out its timeout', async (t) => {
    const { app, locks } = await createLockApp(db.settings, { strategy: 'row-lock', shutdownTimeoutMs: 500 });
    let closed = false;
    try {
      const plain = await locks.acquire('sd:held');
      const waiter = locks.acquire('sd:held', { timeoutMs: 8_000 }).then(
        () => 'granted',
        (e: unknown) => e,
      );
      await eventually(async () => (await db.lockWaits()) >= 1, 5_000, 'the waiter in the server');
      const started = performance.now();
      await app.close();
      closed = true;
      const closeMs = performance.now() - started;
      const waited = await waiter;
      t.diagnostic(`app.close() took ${Math.round(closeMs)} ms; waiter: ${String(waited)}`);
      assert.equal(plain.signal.aborted, true);
      // shutdownTimeoutMs is 500 ms and nothing runs (about 100 ms expected): 4 s is a generous margin
      // on a loaded machine, half of the waiter's 8 s budget that a shutdown waiting on it takes.
      assert.ok(closeMs < 4_000, `app.close() took ${Math.round(closeMs)} ms`);
      assert.ok(waited instanceof DbLockError, `the waiter was rejected with a typed error: ${String(waited)}`);
    } finally {
      if (!closed) await app.close();
    }
  });

  it('a decorated holder still running past shutdownTimeoutMs: its work commits whole or not at all', async () => {
    const { app, locks } = await createLockApp(db.settings, { strategy: 'row-lock', shutdownTimeoutMs: 200, escapedWrites: 'ignore' });
    let started!: () => void;
    const running = new Promise<void>((resolve) => (started = resolve));
    const call = locks
      .runLocked('sd:running', async () => {
        await locks.manager.query("INSERT INTO work (note) VALUES ('run:before')");
        started();
        await sleep(1_500); // shutdown gives up on it after 200 ms
        await locks.manager.query("INSERT INTO work (note) VALUES ('run:after')");
        return 'done';
      })
      .then(
        (v) => v,
        (e: unknown) => e,
      );
    await running;
    await app.close();
    const outcome = await call;
    const notes = (await db.query<{ note: string }[]>("SELECT note FROM work WHERE note LIKE 'run:%' ORDER BY id")).map((r) => r.note);
    const audit = (await db.logRows('sd:running')).map((r) => r.status);
    const report = `outcome ${String(outcome)}; committed ${JSON.stringify(notes)}; audit ${JSON.stringify(audit)}`;
    if (outcome === 'done') assert.deepEqual(notes, ['run:before', 'run:after'], report);
    else {
      assert.ok(outcome instanceof LockLostError || outcome instanceof DbLockError, report);
      assert.deepEqual(notes, [], `the call failed, yet part of its work committed: ${report}`);
    }
  });
});
