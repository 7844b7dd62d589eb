import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { eventually } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';
import { LockWorker } from '../support/worker-host.js';
import type { HoldResult } from '../contract/scenarios/holders.js';
import { contractSuite } from '../support/contract-targets.js';

/**
 * What the row-lock strategy buys: a holder that dies frees its key the moment the server sees
 * its connection close (the kernel closes a SIGKILLed process's sockets), not after its lease.
 * The lease here is 30 s; the waiter, already waiting in the database, must hold the key within
 * BOUND_MS of the kill. The dead holder's audit row and token bump rolled back with its work, and
 * its process is gone before it could write a terminal row: the log shows the next holder only,
 * with the same token, 1 (no hold of that token ever committed before).
 */
const LEASE_MS = 30_000;
/** The server noticing the closed socket, the rollback, the waiter's grant record and IPC, on a loaded 2-core machine. */
const BOUND_MS = 3_000;
const SCENARIO = new URL('../contract/scenarios/holders.js', import.meta.url).href;

contractSuite('holder-connection', 'row-lock: a SIGKILLed holder', { postgres: true }, (target) => {
  let db: TestDatabase;
  let workers: LockWorker[] = [];
  before(async () => {
    db = await TestDatabase.forTarget(target);
    workers = await LockWorker.startMany(2, {
      settings: db.settings,
      options: target.options({ leaseMs: LEASE_MS }),
    });
  });
  after(async () => {
    await Promise.all(workers.map((w) => w.close()));
    await db?.drop();
  });

  it(`frees the key at once (within ${BOUND_MS} ms, lease ${LEASE_MS} ms); the log shows only the next holder`, async (t) => {
    const [holder, waiter] = workers as [LockWorker, LockWorker];
    const key = 'crash';
    const held = await holder.run<HoldResult>(SCENARIO, 'acquireAndKeep', {
      key,
    });
    assert.equal(held.fencingToken, 1);

    let asking!: () => void;
    const askingSeen = new Promise<void>((resolve) => (asking = resolve));
    const taken = waiter.run<HoldResult>(SCENARIO, 'acquireAndRelease', { key, timeoutMs: 20_000 }, (event) => {
      if (event === 'asking') asking();
    });
    await askingSeen;
    // The waiter is queued in the server behind the holder's row lock before the kill.
    await eventually(async () => (await db.lockWaits()) > 0, 10_000, 'the waiter blocked in the server');
    const killedAt = performance.now();
    await holder.kill();
    const result = await taken;
    const elapsed = performance.now() - killedAt;
    assert.equal(result.fencingToken, 1, 'the dead holder never committed token 1');
    assert.ok(elapsed < BOUND_MS, `waited ${Math.round(elapsed)} ms after the kill`);

    const rows = await db.logRows(key);
    assert.deepEqual(
      rows.map((r) => [r.status, Number(r.fencing_token)]),
      [['RELEASED', 1]],
    );
    t.diagnostic(`granted ${Math.round(elapsed)} ms after SIGKILL (lease ${LEASE_MS} ms)`);
  });
});
