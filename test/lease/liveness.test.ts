import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { TestDatabase } from '../support/test-database.js';
import { LockWorker } from '../support/worker-host.js';
import { eventually } from '../support/lock-app.js';
import type { HoldResult } from '../contract/scenarios/holders.js';
import { contractSuite } from '../support/contract-targets.js';

/**
 * Liveness: a SIGKILLed holder's lock is free again within its lease plus one poll interval
 * of the waiter, and never before its lease ran out (by the server clock); the dead holder's log
 * row ends EXPIRED, naming the new owner.
 */
const LEASE_MS = 1_000;
const POLL_MS = 200; // retryMaxDelayMs: the longest pause between two tries of a waiter
/** Epsilon for one grant round trip plus IPC on a loaded 2-core machine. */
const EPSILON_MS = 400;
const SCENARIO = new URL('../contract/scenarios/holders.js', import.meta.url).href;

contractSuite('crash-liveness-lease', 'a SIGKILLed holder', { postgres: true }, (target) => {
  let db: TestDatabase;
  let workers: LockWorker[] = [];
  before(async () => {
    db = await TestDatabase.forTarget(target);
    workers = await LockWorker.startMany(2, { settings: db.settings, options: target.options({ leaseMs: LEASE_MS, retryMaxDelayMs: POLL_MS }) });
  });
  after(async () => {
    await Promise.all(workers.map((w) => w.close()));
    await db?.drop();
  });

  it('frees the key within lease + one poll interval, never earlier, and its row ends EXPIRED', async (t) => {
    const [holder, waiter] = workers as [LockWorker, LockWorker];
    const key = 'crash';
    const held = await holder.run<HoldResult>(SCENARIO, 'acquireAndKeep', { key });
    assert.equal(held.fencingToken, 1);

    // Let the holder's watchdog renew at least once, so the lease we race against is a renewed one.
    const [first] = await db.logRows(key);
    await eventually(
      async () => {
        const [row] = await db.logRows(key);
        return (row!.lease_ends_at as Date).getTime() > (first!.lease_ends_at as Date).getTime();
      },
      5_000,
      'a lease renewal',
    );

    let asking!: () => void;
    const askingSeen = new Promise<void>((resolve) => (asking = resolve));
    const taken = waiter.run<HoldResult>(SCENARIO, 'acquireAndRelease', { key, timeoutMs: 15_000 }, (event) => {
      if (event === 'asking') asking();
    });
    await askingSeen;

    const killedAt = performance.now();
    await holder.kill();
    const [{ now: deadAt }] = (await db.query(`SELECT ${db.sql.utcNow} AS now`)) as [{ now: Date }];
    const result = await taken;
    const elapsed = performance.now() - killedAt;
    assert.equal(result.fencingToken, 2);

    const [dead, next] = (await db.logRows(key)) as [Record<string, unknown>, Record<string, unknown>];
    assert.equal(dead.status, 'EXPIRED');
    assert.match(String(dead.note), /taken over by /);
    assert.equal(next.status, 'RELEASED');
    assert.ok(String(dead.note).endsWith(String(next.owner)), 'the EXPIRED row names its successor');

    // The dead holder's lease end as the server saw it: its process's last renewal plus its lease.
    const deadExpiry = (dead.lease_ends_at as Date).getTime();
    const grantedAt = (next.acquired_at as Date).getTime();
    // Server clock: never granted before the dead holder's lease ran out ...
    assert.ok(grantedAt >= deadExpiry, `granted ${deadExpiry - grantedAt} ms before the dead holder's lease ended`);
    // ... its lease ran out no later than a lease after its death ...
    assert.ok(deadExpiry <= deadAt.getTime() + LEASE_MS, 'the dead holder was renewed after it died');
    // ... and the waiter got the key within one poll interval of that.
    assert.ok(grantedAt - deadExpiry <= POLL_MS + EPSILON_MS, `granted ${grantedAt - deadExpiry} ms after the lease ended`);
    // Wall clock from the kill, as a caller sees it.
    assert.ok(elapsed <= LEASE_MS + POLL_MS + EPSILON_MS, `waited ${Math.round(elapsed)} ms after the kill`);
    t.diagnostic(
      `granted ${grantedAt - deadExpiry} ms after the dead holder's lease ended (server clock), ${Math.round(elapsed)} ms after SIGKILL ` +
        `(bound: lease ${LEASE_MS} + poll ${POLL_MS} + epsilon ${EPSILON_MS} ms)`,
    );
  });
});
