import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { TestDatabase } from '../support/test-database.js';
import { LockWorker } from '../support/worker-host.js';
import { contractSuite } from '../support/contract-targets.js';
import type { Outcome } from './stall-scenarios.js';

/**
 * A fenced holder stalled for several leases while nobody contends its key and no janitor runs.
 * docs/architecture.md ("Renewal and the signal"): "At the local deadline the lock is lost to its
 * holder: the signal aborts, its rows are ended at once (EXPIRED), and a fenced commit under it
 * refuses — whatever a late renewal would have said." README (strategies table): a stall (GC pause,
 * SIGSTOP, a debugger) "loses the lock after its lease; its fenced commit is refused and rolled back";
 * README (signal): "After the process itself stalled (a blocked event loop, a stopped process) ...
 * reading `signal.aborted` ... checks that deadline first".
 *
 * The stall here is a blocked event loop (3 leases of CPU-bound work inside the locked method),
 * which makes the order deterministic: the method returns and its fence is sent in the same
 * turn, before any watchdog timer can run. The fence itself must see that the local deadline
 * passed (as `signal.aborted` would).
 */
const SCENARIOS = new URL('./stall-scenarios.js', import.meta.url).href;
const LEASE_MS = 1_000;

contractSuite('fenced-commit', 'a fenced call stalled past its lease, nobody contending', { postgres: true }, (target) => {
  let db: TestDatabase;
  let holder: LockWorker;
  before(async () => {
    db = await TestDatabase.forTarget(target);
    await db.query(`CREATE TABLE hs_writes (id ${db.sql.autoId}, who VARCHAR(32) NOT NULL, token BIGINT NOT NULL)${db.sql.tableOptions}`);
    holder = await LockWorker.start({ settings: db.settings, options: target.options({ leaseMs: LEASE_MS, janitor: false }) });
  });
  after(async () => {
    await holder?.kill();
    await db?.drop();
  });

  for (const kind of ['lock', 'permit'] as const) {
    it(`${kind}: its event loop blocked 3 leases inside runLocked/runSemaphore, the commit after it is refused (LockLostError), nothing written`, async () => {
      const key = `fence-stall:${kind}`;
      const who = `H-${kind}`;
      const args = { key, who, leaseMs: LEASE_MS, holdMs: 0, blockMs: 3 * LEASE_MS, table: 'hs_writes', limit: 2 };
      const result = await holder.run<Outcome>(SCENARIOS, kind === 'lock' ? 'fencedStall' : 'fencedPermitStall', args);
      const written = await db.query<{ who: string }[]>('SELECT who FROM hs_writes WHERE who = ?', [who]);
      const rows = await db.logRows(key);
      const log = JSON.stringify(rows.map((r) => ({ status: r.status, note: r.note, lease_ms: r.lease_ms, hold_ms: r.hold_ms })));
      assert.equal(
        result.outcome,
        'LockLostError',
        `the fenced call stalled ${3 * LEASE_MS} ms (lease ${LEASE_MS} ms) committed: ${JSON.stringify(result)}; log: ${log}`,
      );
      assert.equal(written.length, 0, 'its business write was rolled back');
      assert.equal(rows[0]!.status, 'EXPIRED', log);
    });
  }

  it('extend() called right after its event loop was blocked 3 leases rejects with LockLostError (the lock was lost at its local deadline)', async () => {
    const key = 'fence-stall:extend';
    const result = await holder.run<Outcome>(SCENARIOS, 'handleStall', {
      key,
      leaseMs: LEASE_MS,
      holdMs: 0,
      blockMs: 3 * LEASE_MS,
      extendMs: 10_000,
    });
    const rows = await db.logRows(key);
    const log = JSON.stringify(rows.map((r) => ({ status: r.status, note: r.note, lease_ms: r.lease_ms, hold_ms: r.hold_ms })));
    assert.match(
      String(result.extend),
      /^LockLostError/,
      `extend() ${3 * LEASE_MS} ms into a ${LEASE_MS} ms lease: ${JSON.stringify(result)}; log: ${log}`,
    );
    assert.equal(result.abortedAfter, true, `its signal after the stall: ${JSON.stringify(result)}`);
    assert.equal(rows[0]!.status, 'EXPIRED', log);
  });
});
