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
 * One holder process SIGSTOPped for 18 s (18 leases of 1 s, and past the 15 s answer bound) while
 * it holds: a fenced lock call, a plain handle, a handle it will extend(), a permit handle, a fenced
 * permit call and a withLock. Meanwhile another process takes four of the keys over, and a janitor
 * at its smallest settings (intervalMs 100, batchSize 1, logRetentionMs 0, idleKeyMs 0) reclaims
 * the rest, prunes, reaps idle key rows, and (its clock moved by hand: renewed_at aged 2 h) the
 * stopped process's lease row. After SIGCONT every holder must learn of its loss with the
 * documented error, nothing of its fenced work commits, its tokens are below the takers', the log
 * says what happened, and the same process acquires again with larger tokens.
 */
const SCENARIOS = new URL('./stall-scenarios.js', import.meta.url).href;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const LEASE_MS = 1_000;
const STALL_MS = 18_000;

contractSuite('lease-janitor', 'a holder stopped 18 s while others take over and the janitor runs', (target) => {
  let db: TestDatabase;
  let janitor: { app: INestApplicationContext; locks: LockService };
  let holder: LockWorker;
  let taker: LockWorker;

  before(async () => {
    db = await TestDatabase.create();
    await db.query('CREATE TABLE hs_writes (id INT AUTO_INCREMENT PRIMARY KEY, who VARCHAR(32) NOT NULL, token BIGINT NOT NULL) ENGINE=InnoDB');
    const quiet = target.options({ leaseMs: LEASE_MS, janitor: false, retryMaxDelayMs: 50 });
    const started = await LockWorker.startMany(2, { settings: db.settings, options: quiet });
    holder = started[0]!;
    taker = started[1]!;
    janitor = await createLockApp(
      db.settings,
      target.options({ leaseMs: LEASE_MS, janitor: { intervalMs: 100, batchSize: 1, logRetentionMs: 0, idleKeyMs: 0 } }),
    );
  });
  after(async () => {
    holder?.signal('SIGCONT');
    await Promise.all([holder?.kill(), taker?.close()]);
    await janitor?.app.close();
    await db?.drop();
  });

  it('after SIGCONT: every holder learns of its loss, nothing fenced commits, tokens order, the log tells, and it acquires again', async () => {
    const runs: Record<string, { fn: string; args: Record<string, unknown> }> = {
      fenced: { fn: 'fencedStall', args: { key: 'st:fenced', who: 'H', leaseMs: LEASE_MS, holdMs: 300, untilStopped: true, table: 'hs_writes' } },
      handle: { fn: 'handleStall', args: { key: 'st:handle', leaseMs: LEASE_MS, holdMs: 300, untilStopped: true } },
      extend: { fn: 'handleStall', args: { key: 'st:extend', leaseMs: LEASE_MS, holdMs: 300, untilStopped: true, extendMs: 5_000 } },
      permit: { fn: 'handleStall', args: { key: 'st:permit', leaseMs: LEASE_MS, holdMs: 300, untilStopped: true, limit: 1 } },
      fencedPermit: {
        fn: 'fencedPermitStall',
        args: { key: 'st:fperm', limit: 1, who: 'H', leaseMs: LEASE_MS, holdMs: 300, untilStopped: true, table: 'hs_writes' },
      },
      with: { fn: 'withStall', args: { key: 'st:with', leaseMs: LEASE_MS, holdMs: 300, untilStopped: true } },
    };
    const holderProcess = await holder.run<string>(SCENARIOS, 'processId');
    const insides: Promise<number>[] = [];
    const results: Record<string, Promise<Outcome>> = {};
    for (const [name, { fn, args }] of Object.entries(runs)) {
      let seen!: (token: number) => void;
      insides.push(new Promise<number>((r) => (seen = r)));
      results[name] = holder.run<Outcome>(SCENARIOS, fn, args, (e, d) => e === 'inside' && seen((d as { token: number }).token));
      results[name].catch(() => undefined);
    }
    await Promise.all(insides);
    holder.signal('SIGSTOP');
    const stoppedAt = performance.now();

    // Takers (another process) on four keys; the janitor reclaims the other two.
    const taken = await Promise.all([
      taker.run<Outcome>(SCENARIOS, 'fencedWrite', { key: 'st:fenced', who: 'B', leaseMs: 5_000, table: 'hs_writes' }),
      taker.run<Outcome>(SCENARIOS, 'takeOnce', { key: 'st:handle', leaseMs: 5_000, timeoutMs: 15_000 }),
      taker.run<Outcome>(SCENARIOS, 'takeOnce', { key: 'st:permit', leaseMs: 5_000, limit: 1, timeoutMs: 15_000 }),
      taker.run<Outcome>(SCENARIOS, 'fencedWrite', { key: 'st:fperm', limit: 1, who: 'B', leaseMs: 5_000, table: 'hs_writes' }),
    ]);
    for (const t of taken) assert.ok(t.outcome === 'committed' || t.outcome === 'acquired', JSON.stringify(t));

    // Every row of the stopped process ends (taken over or reclaimed by the janitor).
    await eventually(
      async () =>
        Number(
          (
            await db.query<{ n: number }[]>(`SELECT COUNT(*) AS n FROM db_lock_log WHERE process_id = ? AND status IN ('ACQUIRED', 'COMPLETED')`, [
              holderProcess,
            ])
          )[0]!.n,
        ) === 0,
      10_000,
      "the stopped holder's rows ended",
    );
    // Its process lease row aged 2 h (it cannot renew while stopped): the janitor reaps it.
    await db.query(`UPDATE db_lock_process SET renewed_at = renewed_at - INTERVAL 2 HOUR WHERE id = ?`, [holderProcess]);
    await eventually(
      async () => (await db.query(`SELECT id FROM db_lock_process WHERE id = ?`, [holderProcess])).length === 0,
      5_000,
      "the stopped holder's process row reaped",
    );
    // Idle key rows of the keys nobody took (their last claim EXPIRED) are reaped too.
    await eventually(
      async () =>
        (await db.query(`SELECT lock_key FROM db_lock WHERE lock_key IN (?)`, [[Buffer.from('st:extend'), Buffer.from('st:with')]])).length === 0,
      5_000,
      'idle key rows reaped',
    );
    const tokensBefore = new Map<string, number>();
    for (const name of Object.keys(runs)) {
      const key = runs[name]!.args.key as string;
      const rows = await db.query<{ m: number }[]>(`SELECT MAX(fencing_token) AS m FROM db_lock_log WHERE lock_key = ?`, [Buffer.from(key)]);
      tokensBefore.set(key, Number(rows[0]!.m ?? 0));
    }
    await sleep(Math.max(0, STALL_MS - (performance.now() - stoppedAt)));
    holder.signal('SIGCONT');

    const outcome: Record<string, Outcome> = {};
    for (const name of Object.keys(runs)) outcome[name] = await results[name]!;
    const all = JSON.stringify(outcome);
    // The stall's premise: each fenced holder was still inside when stopped, and woke past its deadline.
    for (const name of ['fenced', 'fencedPermit'])
      assert.ok((outcome[name]!.debug?.wokeAfterDeadline ?? 0) > 0, `${name}: its hold spanned the stop: ${all}`);
    assert.equal(outcome.fenced!.outcome, 'LockLostError', all);
    assert.equal(outcome.fencedPermit!.outcome, 'LockLostError', all);
    for (const name of ['handle', 'extend', 'permit']) {
      assert.equal(outcome[name]!.abortedAfter, true, `${name}: signal aborted after the stall: ${all}`);
      assert.equal(outcome[name]!.release, 'LockLostError', `${name}: release reports the loss: ${all}`);
    }
    assert.match(String(outcome.extend!.extend), /^LockLostError/, `extend after the stall: ${all}`);
    assert.equal(outcome.with!.abortedAfter, true, all);
    assert.equal(outcome.with!.outcome, 'LockLostError', `withLock reports the loss: ${all}`);

    const writes = await db.query<{ who: string; token: number }[]>('SELECT who, token FROM hs_writes ORDER BY id');
    assert.deepEqual(
      writes.map((w) => w.who),
      ['B', 'B'],
      `only the takers' fenced work committed: ${JSON.stringify(writes)}`,
    );

    // The log: the stopped holder's rows EXPIRED, taken over or reclaimed; takers' tokens above its own.
    for (const name of Object.keys(runs)) {
      const key = runs[name]!.args.key as string;
      const rows = await db.logRows(key);
      const mine = rows.filter((r) => String(r.process_id) === String(holderProcess));
      assert.equal(mine.length, 1, `${key}: ${JSON.stringify(rows)}`);
      assert.equal(mine[0]!.status, 'EXPIRED', `${key}: ${JSON.stringify(mine[0])}`);
      assert.match(String(mine[0]!.note), /taken over by|reclaimed by janitor/, `${key}: ${JSON.stringify(mine[0])}`);
      const later = rows.filter((r) => Number(r.id) > Number(mine[0]!.id));
      for (const r of later) assert.ok(Number(r.fencing_token) > Number(mine[0]!.fencing_token), `${key}: tokens ${JSON.stringify(rows)}`);
    }

    // The resumed process acquires again (key rows and its process row were reaped): larger tokens.
    for (const name of Object.keys(runs)) {
      const { key, limit } = runs[name]!.args as { key: string; limit?: number };
      const again = await holder.run<Outcome>(SCENARIOS, 'takeOnce', { key, leaseMs: LEASE_MS, limit, timeoutMs: 5_000 });
      assert.equal(again.outcome, 'acquired', `${key}: ${JSON.stringify(again)}`);
      assert.equal(again.release, 'released', `${key}: ${JSON.stringify(again)}`);
      assert.ok(again.token > tokensBefore.get(key)!, `${key}: token ${again.token} after ${tokensBefore.get(key)}`);
    }
  });
});
