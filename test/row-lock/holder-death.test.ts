import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { TestDatabase } from '../support/test-database.js';
import { LockWorker } from '../support/worker-host.js';
import type { HoldResult } from '../contract/scenarios/holders.js';

/**
 * What the row-lock strategy buys: a holder that dies frees its key the moment the server sees
 * its connection close (the kernel closes a SIGKILLed process's sockets), not after its lease.
 * The lease here is 30 s; the waiter, already waiting in the database, must hold the key within
 * BOUND_MS of the kill. The dead holder's log row is ended EXPIRED by the next holder, which holds
 * the InnoDB lock and so knows the row's owner is gone.
 */
const LEASE_MS = 30_000;
/** The server noticing the closed socket, the rollback, the waiter's grant record and IPC, on a loaded 2-core machine. */
const BOUND_MS = 3_000;
const SCENARIO = new URL('../contract/scenarios/holders.js', import.meta.url).href;

describe('row-lock: a SIGKILLed holder', () => {
  let db: TestDatabase;
  let workers: LockWorker[] = [];
  before(async () => {
    db = await TestDatabase.create();
    workers = await LockWorker.startMany(2, {
      settings: db.settings,
      options: { strategy: 'row-lock', leaseMs: LEASE_MS },
    });
  });
  after(async () => {
    await Promise.all(workers.map((w) => w.close()));
    await db?.drop();
  });

  it(`frees the key at once (within ${BOUND_MS} ms, lease ${LEASE_MS} ms) and its row ends EXPIRED`, async (t) => {
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
    await new Promise((r) => setTimeout(r, 300));
    const killedAt = performance.now();
    await holder.kill();
    const result = await taken;
    const elapsed = performance.now() - killedAt;
    assert.equal(result.fencingToken, 2);
    assert.ok(elapsed < BOUND_MS, `waited ${Math.round(elapsed)} ms after the kill`);

    const [dead, next] = (await db.logRows(key)) as [Record<string, unknown>, Record<string, unknown>];
    assert.equal(dead.status, 'EXPIRED');
    assert.match(String(dead.note), /taken over by /);
    assert.equal(next.status, 'RELEASED');
    t.diagnostic(`granted ${Math.round(elapsed)} ms after SIGKILL (lease ${LEASE_MS} ms)`);
  });
});
