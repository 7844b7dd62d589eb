import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import type { LockService } from '../../lib/index.js';
import { TestDatabase } from '../support/test-database.js';
import { LockWorker } from '../support/worker-host.js';
import { createLockApp, eventually } from '../support/lock-app.js';
import { contractSuite } from '../support/contract-targets.js';
import type { Outcome } from './stall-scenarios.js';

/**
 * A process whose lease row the janitor reaped while it held nothing (its clock moved by hand: 2 h
 * without a renewal) takes a lock and a permit (limit 2), and is stopped 17 s before its first
 * renewal re-creates that row: takeovers of its rows then bump the ended_count of no row. Another
 * process takes the lock over, two others fill the semaphore (the second by taking the stopped
 * permit over). After SIGCONT its signals must read aborted, its releases report LockLostError,
 * and it acquires again with larger tokens; its process row comes back.
 */
const SCENARIOS = new URL('./stall-scenarios.js', import.meta.url).href;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const LEASE_MS = 1_000;

contractSuite('admin', 'a holder with a reaped process row, stopped before its first renewal', { postgres: true }, (target) => {
  let db: TestDatabase;
  let admin: { app: INestApplicationContext; locks: LockService };
  before(async () => {
    db = await TestDatabase.forTarget(target);
    admin = await createLockApp(db.settings, target.options({ leaseMs: LEASE_MS, janitor: { intervalMs: 3_600_000 } }));
  });
  after(async () => {
    await admin?.app.close();
    await db?.drop();
  });

  it('its lock and permit are lost and reported after SIGCONT; it acquires again with larger tokens', async () => {
    const options = target.options({ leaseMs: LEASE_MS, janitor: false, retryMaxDelayMs: 50 });
    const [holder, taker1, taker2] = (await LockWorker.startMany(3, { settings: db.settings, options })) as [LockWorker, LockWorker, LockWorker];
    try {
      const holderProcess = await holder.run<string>(SCENARIOS, 'processId');
      await db.query(`UPDATE db_lock_process SET renewed_at = renewed_at - INTERVAL '2' HOUR WHERE id = ?`, [holderProcess]);
      await admin.locks.runJanitor();
      assert.equal((await db.query(`SELECT id FROM db_lock_process WHERE id = ?`, [holderProcess])).length, 0, 'process row reaped');

      const insides: Promise<void>[] = [];
      const start = (args: Record<string, unknown>): Promise<Outcome> => {
        let seen!: () => void;
        insides.push(new Promise<void>((r) => (seen = r)));
        const run = holder.run<Outcome>(SCENARIOS, 'handleStall', args, (e) => e === 'inside' && seen());
        run.catch(() => undefined);
        return run;
      };
      const lockRun = start({ key: 'rp:lock', leaseMs: LEASE_MS, holdMs: 200, untilStopped: true });
      const permitRun = start({ key: 'rp:sem', leaseMs: LEASE_MS, holdMs: 200, untilStopped: true, limit: 2 });
      await Promise.all(insides);
      holder.signal('SIGSTOP');
      const stoppedAt = performance.now();
      assert.equal((await db.query(`SELECT id FROM db_lock_process WHERE id = ?`, [holderProcess])).length, 0, 'no renewal before the stop');

      const [took, p1, p2] = await Promise.all([
        taker1.run<Outcome>(SCENARIOS, 'takeOnce', { key: 'rp:lock', leaseMs: 5_000, timeoutMs: 15_000 }),
        taker1.run<Outcome>(SCENARIOS, 'handleStall', { key: 'rp:sem', leaseMs: 5_000, holdMs: 3_000, limit: 2 }),
        sleep(200).then(() => taker2.run<Outcome>(SCENARIOS, 'handleStall', { key: 'rp:sem', leaseMs: 5_000, holdMs: 100, limit: 2 })),
      ]);
      assert.equal(took.outcome, 'acquired', JSON.stringify(took));
      assert.equal(p1.release, 'released', JSON.stringify(p1));
      assert.equal(p2.release, 'released', JSON.stringify(p2));
      await sleep(Math.max(0, 17_000 - (performance.now() - stoppedAt)));
      holder.signal('SIGCONT');
      const [lockResult, permitResult] = await Promise.all([lockRun, permitRun]);
      const all = JSON.stringify({ lockResult, permitResult });
      for (const r of [lockResult, permitResult]) {
        assert.equal(r.abortedAfter, true, all);
        assert.equal(r.release, 'LockLostError', all);
      }
      for (const key of ['rp:lock', 'rp:sem']) {
        const rows = await db.logRows(key);
        const mine = rows.filter((r) => String(r.process_id) === String(holderProcess));
        assert.equal(mine.length, 1, JSON.stringify(rows));
        assert.equal(mine[0]!.status, 'EXPIRED', JSON.stringify(rows));
        assert.match(String(mine[0]!.note), /taken over by/);
        const max = Math.max(...rows.map((r) => Number(r.fencing_token)));
        assert.ok(
          rows.filter((r) => Number(r.id) > Number(mine[0]!.id)).every((r) => Number(r.fencing_token) > Number(mine[0]!.fencing_token)),
          JSON.stringify(rows),
        );
        const again = await holder.run<Outcome>(SCENARIOS, 'handleStall', {
          key,
          leaseMs: LEASE_MS,
          holdMs: 500,
          limit: key === 'rp:sem' ? 2 : undefined,
        });
        assert.equal(again.release, 'released', JSON.stringify(again));
        assert.equal(again.abortedAfter, false, JSON.stringify(again));
        assert.ok(again.token > max, `${key}: token ${again.token} after ${max}`);
      }
      await eventually(
        async () => (await db.query(`SELECT id FROM db_lock_process WHERE id = ?`, [holderProcess])).length === 1,
        3_000,
        'process row back',
      );
    } finally {
      holder.signal('SIGCONT');
      await Promise.all([holder.kill(), taker1.close(), taker2.close()]);
    }
  });
});
