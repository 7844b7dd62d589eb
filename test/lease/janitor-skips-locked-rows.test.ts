import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import type { JanitorReport, LockService } from '../../lib/index.js';
import { TestDatabase } from '../support/test-database.js';
import { LockWorker } from '../support/worker-host.js';
import { createLockApp } from '../support/lock-app.js';
import { contractSuite } from '../support/contract-targets.js';
import type { Outcome } from './stall-scenarios.js';

/**
 * A holder stopped between its fence (its log row written RELEASED in its open business
 * transaction, so that row stays locked) and its COMMIT: its key stays its own while it is stopped,
 * by design (InnoDB, or PostgreSQL, orders the takeover after the COMMIT). But the janitor must go on with the rest
 * of the cluster's work: a dead process's expired holder on another key is reclaimed, as the
 * janitor's own comment on its row-lock rows says ("SKIP LOCKED: the janitor never waits on a
 * holder"). The commit is held by a user's TypeORM subscriber (beforeTransactionCommit), which also
 * makes the commit go as the fence UPDATE, then COMMIT (README: the one-CALL commit routine is not
 * used while a subscriber listens to transaction events); a GC pause or a network cut at that point
 * leaves the same open transaction.
 */
const SCENARIOS = new URL('./stall-scenarios.js', import.meta.url).href;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const LEASE_MS = 1_000;

contractSuite('lease-janitor', 'the janitor while a holder is stopped between its fence and its COMMIT', { postgres: true }, (target) => {
  let db: TestDatabase;
  let admin: { app: INestApplicationContext; locks: LockService };
  before(async () => {
    db = await TestDatabase.forTarget(target);
    await db.query(`CREATE TABLE hs_writes (id ${db.sql.autoId}, who VARCHAR(32) NOT NULL, token BIGINT NOT NULL)${db.sql.tableOptions}`);
    admin = await createLockApp(db.settings, target.options({ leaseMs: LEASE_MS, janitor: { intervalMs: 3_600_000 } }));
  });
  after(async () => {
    await admin?.app.close();
    await db?.drop();
  });

  it("reclaims a dead process's expired holder on another key while the stopped holder's row is locked", async () => {
    // A dead process's holder whose lease ran out a minute ago, on another key.
    await db.query(
      `INSERT INTO db_lock_log (lock_key, mode, owner, holder, fencing_token, status, lease_ms, acquired_at, expires_at) ` +
        `VALUES ('cm:dead', 'write', ${db.sql.uuid}, 'dead:1', 1, 'ACQUIRED', 30000, ${db.sql.ago(120_000)}, ${db.sql.ago(60_000)})`,
    );
    const holder = await LockWorker.start({ settings: db.settings, options: target.options({ leaseMs: LEASE_MS, janitor: false }) });
    try {
      let committing!: () => void;
      const atCommit = new Promise<void>((r) => (committing = r));
      const run = holder.run<Outcome>(
        SCENARIOS,
        'fencedStallAtCommit',
        { key: 'cm:held', who: 'H', leaseMs: LEASE_MS, holdMs: 300, untilStopped: true, table: 'hs_writes' },
        (e) => e === 'committing' && committing(),
      );
      await atCommit;
      holder.signal('SIGSTOP');
      await sleep(LEASE_MS + 500); // its lease has run out by the server clock
      const startedAt = performance.now();
      const report = await admin.locks.runJanitor().then(
        (r: JanitorReport) => r,
        (e: Error) => ({ error: `${e.name}: ${e.message}` }),
      );
      const tookMs = Math.round(performance.now() - startedAt);
      const [dead] = await db.query<{ status: string; note: string | null }[]>(`SELECT status, note FROM db_lock_log WHERE lock_key = 'cm:dead'`);
      holder.signal('SIGCONT');
      const result = await run;
      assert.ok(!('error' in report), `the janitor run failed after ${tookMs} ms: ${JSON.stringify(report)}`);
      assert.equal(dead!.status, 'EXPIRED', `the dead holder on another key was not reclaimed: ${JSON.stringify({ dead, report, tookMs })}`);
      assert.equal(result.outcome, 'committed', `its fence ran in time, so its COMMIT stands: ${JSON.stringify(result)}`);
    } finally {
      holder.signal('SIGCONT');
      await holder.kill();
    }
  });
});
