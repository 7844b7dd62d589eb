/**
 * The janitor's reclaim with a small `janitor.batchSize` (README: rows per clean-up statement, 1–100000)
 * while the oldest expired holder is stopped between its fence and its COMMIT (its log row locked, as in
 * test/lease/janitor-skips-locked-rows.test.ts). mysql-janitor-store.ts: "one stalled holder must not
 * stop every janitor run from reclaiming the others". Here the stalled holder's row is the oldest (the
 * reclaim reads candidates in id order), and a dead process's expired holder on another key comes after.
 * Expected: the dead holder is reclaimed (EXPIRED) by the run. (Prune and reap are off here: the
 * prune's key-row lift waits on the stopped holder's locks too, see prune-beside-row-lock-hold.test.ts.)
 */
import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import type { JanitorReport, LockService } from '../../lib/index.js';
import { TestDatabase } from '../support/test-database.js';
import { LockWorker } from '../support/worker-host.js';
import { createLockApp } from '../support/lock-app.js';
import type { Outcome } from '../lease/stall-scenarios.js';
import { contractSuite } from '../support/contract-targets.js';

const SCENARIOS = new URL('../lease/stall-scenarios.js', import.meta.url).href;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const LEASE_MS = 1_000;

if (!process.env.DB_LOCK_WORKER)
  contractSuite('lease-janitor', 'reclaim with batchSize 1 behind a stalled holder', { postgres: true }, (target) => {
    let db: TestDatabase;
    let admin: { app: INestApplicationContext; locks: LockService };
    before(async () => {
      db = await TestDatabase.forTarget(target);
      await db.query(`CREATE TABLE hs_writes (id ${db.sql.autoId}, who VARCHAR(32) NOT NULL, token BIGINT NOT NULL)${db.sql.tableOptions}`);
      admin = await createLockApp(
        db.settings,
        target.options({
          leaseMs: LEASE_MS,
          janitor: { intervalMs: 3_600_000, batchSize: 1, logRetentionMs: Infinity, idleKeyMs: Infinity },
        }),
      );
    });
    after(async () => {
      await admin?.app.close();
      await db?.drop();
    });

    it("reclaims a dead process's expired holder queued behind the stopped holder's locked row", async () => {
      const holder = await LockWorker.start({ settings: db.settings, options: target.options({ leaseMs: LEASE_MS, janitor: false }) });
      try {
        let committing!: () => void;
        const atCommit = new Promise<void>((r) => (committing = r));
        const run = holder.run<Outcome>(
          SCENARIOS,
          'fencedStallAtCommit',
          { key: 'bs:held', who: 'H', leaseMs: LEASE_MS, holdMs: 300, untilStopped: true, table: 'hs_writes' },
          (e) => e === 'committing' && committing(),
        );
        await atCommit;
        holder.signal('SIGSTOP');
        // A dead process's holder whose lease ran out a minute ago, on another key (a later row id).
        await db.query(
          `INSERT INTO db_lock_log (lock_key, mode, owner, holder, fencing_token, status, lease_ms, acquired_at, expires_at) ` +
            `VALUES (?, 'write', ${db.sql.uuid}, 'dead:1', 1, 'ACQUIRED', 30000, ${db.sql.ago(120_000)}, ${db.sql.ago(60_000)})`,
          [Buffer.from('bs:dead')],
        );
        await sleep(LEASE_MS + 500); // the stopped holder's lease has run out by the server clock
        const open = await db.openTransactions();
        const startedAt = performance.now();
        const report = await admin.locks.runJanitor().then(
          (r: JanitorReport) => r,
          (e: Error) => ({ error: `${e.name}: ${e.message}` }),
        );
        const tookMs = Math.round(performance.now() - startedAt);
        const [dead] = await db.query<{ status: string }[]>(`SELECT status FROM db_lock_log WHERE lock_key = ?`, [Buffer.from('bs:dead')]);
        holder.signal('SIGCONT');
        await run;
        assert.ok(open.length > 0, 'the stopped holder had its transaction open (its row locked) while the janitor ran');
        assert.equal(
          dead!.status,
          'EXPIRED',
          `the dead holder behind the stalled one was not reclaimed: ${JSON.stringify({ dead, report, tookMs })}`,
        );
      } finally {
        holder.signal('SIGCONT');
        await holder.kill();
      }
    });
  });
