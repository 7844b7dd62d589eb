import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { eventually } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';
import { LockWorker } from '../support/worker-host.js';
import type { LedgerArgs, LedgerResult } from '../contract/scenarios/ledger.js';
import { contractSuite } from '../support/contract-targets.js';

/**
 * A row-lock is held exactly as long as its transaction is open on a live connection. A holder
 * process SIGSTOPped for STALL_MS (five times the lease length its module is configured with, which
 * a row-lock ignores) keeps its lock: the waiter, blocked in the server, stays blocked the whole
 * time; after SIGCONT the holder finishes and commits all of its work, then the waiter gets the key
 * and commits. Both commits land, in that order, with tokens 1 then 2.
 */
const LEASE_MS = 600;
const STALL_MS = 3_000;
const SCENARIO = new URL('../contract/scenarios/ledger.js', import.meta.url).href;

contractSuite('row-lock-stall', 'row-lock: a SIGSTOPped holder', { postgres: true }, (target) => {
  let db: TestDatabase;
  let workers: LockWorker[] = [];
  before(async () => {
    db = await TestDatabase.forTarget(target);
    await db.query(`CREATE TABLE ledger (id ${db.sql.autoId}, who VARCHAR(16), step INT, token INT)${db.sql.tableOptions}`);
    workers = await LockWorker.startMany(2, { settings: db.settings, options: target.options({ leaseMs: LEASE_MS }) });
  });
  after(async () => {
    await Promise.all(workers.map((w) => w.close()));
    await db?.drop();
  });

  it(`keeps its lock through a ${STALL_MS} ms stall (lease setting ${LEASE_MS} ms) and commits after SIGCONT; the waiter commits next`, async (t) => {
    const [holder, waiter] = workers as [LockWorker, LockWorker];
    const key = 'stalled';
    let acquired!: () => void;
    const acquiredSeen = new Promise<void>((resolve) => (acquired = resolve));
    const held = holder.run<LedgerResult>(SCENARIO, 'writeTwice', { key, who: 'holder', pauseMs: 200 } satisfies LedgerArgs, (event) => {
      if (event === 'acquired') acquired();
    });
    await acquiredSeen;
    holder.signal('SIGSTOP');
    let stopped = true;
    try {
      let waiterDone = false;
      const waited = waiter.run<LedgerResult>(SCENARIO, 'writeTwice', { key, who: 'waiter', timeoutMs: 30_000 } satisfies LedgerArgs).finally(() => {
        waiterDone = true;
      });
      await eventually(async () => (await db.lockWaits()) > 0, 10_000, 'the waiter blocked in the server');
      const stalledAt = performance.now();
      // For the whole stall the waiter stays blocked and nothing of either side is committed.
      while (performance.now() - stalledAt < STALL_MS) {
        assert.equal(waiterDone, false, 'the waiter got in while the holder was stopped');
        assert.deepEqual(await db.query('SELECT * FROM ledger'), [], 'something committed during the stall');
        await new Promise((r) => setTimeout(r, 100));
      }
      holder.signal('SIGCONT');
      stopped = false;
      const [h, w] = await Promise.all([held, waited]);
      assert.equal(h.fencingToken, 1);
      assert.equal(h.signalAborted, false, 'the stalled holder never lost its lock');
      assert.equal(w.fencingToken, 2);
      const ledger = await db.query<{ who: string; step: number; token: number }[]>('SELECT who, step, token FROM ledger ORDER BY id');
      assert.deepEqual(
        ledger.map((r) => `${r.who}:${r.step}:${r.token}`),
        ['holder:1:1', 'holder:2:1', 'waiter:1:2', 'waiter:2:2'],
      );
      assert.deepEqual(
        (await db.logRows(key)).map((r) => [r.status, Number(r.fencing_token)]),
        [
          ['RELEASED', 1],
          ['RELEASED', 2],
        ],
      );
      t.diagnostic(`holder stopped ${STALL_MS} ms with the lock; both committed in order`);
    } finally {
      if (stopped) holder.signal('SIGCONT');
    }
  });
});
