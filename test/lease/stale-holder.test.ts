import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import { ownLogRow, TestDatabase } from '../support/test-database.js';
import { LockWorker } from '../support/worker-host.js';
import { createLockApp, eventually } from '../support/lock-app.js';
import { type LockHandle, LockLostError, type LockService } from '../../lib/index.js';
import type { StaleOutcome } from '../contract/scenarios/holders.js';
import { stall } from '../support/lock-internals.js';
import { contractSuite } from '../support/contract-targets.js';

/**
 * A stale holder (its lease ran out and another holder took the key over) gets LockLostError
 * from release() and extend(), and touches nothing of the new holder: its log row, lease and
 * what inspect() reports stay exactly as they were.
 */
const SCENARIO = new URL('../contract/scenarios/holders.js', import.meta.url).href;

function isLost(key: string, fencingToken: number) {
  return (error: unknown): boolean => {
    assert.ok(error instanceof LockLostError, `expected LockLostError, got ${String(error)}`);
    assert.equal(error.name, 'LockLostError');
    assert.equal(error.key, key);
    assert.equal(error.fencingToken, fencingToken);
    return true;
  };
}

contractSuite('stale-holder', 'stale holder', { postgres: true }, (target) => {
  let db: TestDatabase;
  let staleApp: INestApplicationContext;
  let freshApp: INestApplicationContext;
  let staleLocks: LockService;
  let freshLocks: LockService;
  before(async () => {
    db = await TestDatabase.forTarget(target);
    // Two apps, two engines and pools: as far as the lock is concerned, two processes.
    ({ app: staleApp, locks: staleLocks } = await createLockApp(db.settings, target.options()));
    ({ app: freshApp, locks: freshLocks } = await createLockApp(db.settings, target.options()));
  });
  after(async () => {
    await staleApp?.close();
    await freshApp?.close();
    await db?.drop();
  });

  /** The stale holder's lease runs out unrenewed; another app takes the key over and is frozen too. */
  async function takeOver(key: string): Promise<{ stale: LockHandle; fresh: LockHandle }> {
    const stale = await staleLocks.acquire(key, { leaseMs: 300 });
    assert.equal(stale.fencingToken, 1);
    await stall(staleLocks, stale);
    await eventually(async () => (await freshLocks.inspect(key)).holders.length === 0, 5_000, 'the stale lease to run out');
    const fresh = await freshLocks.acquire(key, { leaseMs: 30_000, timeoutMs: 5_000 });
    assert.equal(fresh.fencingToken, 2);
    await stall(freshLocks, fresh); // no renewals either: its row must stay byte for byte as the grant left it
    return { stale, fresh };
  }

  async function assertUntouched(key: string, before: Record<string, unknown>[], fresh: LockHandle): Promise<void> {
    const rows = await db.logRows(key);
    // The rows as written (the derived lease end follows the stale process's own watchdog, which
    // renews its process row again once it runs; that row is not a log row).
    assert.deepEqual(rows.map(ownLogRow), before.map(ownLogRow), 'the stale holder changed log rows');
    assert.deepEqual(
      rows.map((r) => r.status),
      ['EXPIRED', 'ACQUIRED'],
    );
    const info = await freshLocks.inspect(key);
    assert.equal(info.holders.length, 1);
    assert.equal(info.holders[0]!.fencingToken, fresh.fencingToken);
    assert.equal(info.holders[0]!.owner, String(rows[1]!.owner));
    assert.equal(info.expiresAt?.getTime(), fresh.expiresAt.getTime());
    assert.equal(info.fencingToken, 2);
  }

  it('extend() then release() of a stale handle reject with LockLostError, new holder untouched', async () => {
    const key = 'stale-extend-first';
    const { stale, fresh } = await takeOver(key);
    const before = await db.logRows(key);
    await assert.rejects(stale.extend(), isLost(key, 1));
    assert.equal(stale.signal.aborted, true, 'a lost lock aborts its signal');
    await assert.rejects(stale.extend(1_000), isLost(key, 1));
    await assert.rejects(stale.release(), isLost(key, 1));
    await assertUntouched(key, before, fresh);
    await fresh.release();
    assert.deepEqual(
      (await db.logRows(key)).map((r) => r.status),
      ['EXPIRED', 'RELEASED'],
    );
  });

  it('release() then extend() of a stale handle reject with LockLostError, new holder untouched', async () => {
    const key = 'stale-release-first';
    const { stale, fresh } = await takeOver(key);
    const before = await db.logRows(key);
    await assert.rejects(stale.release(), isLost(key, 1));
    assert.equal(stale.signal.aborted, true);
    await assert.rejects(stale.extend(), isLost(key, 1));
    await assertUntouched(key, before, fresh);
    // A renewal tick of the stale app must not resurrect anything either.
    assert.equal(staleLocks.stats().held, 0);
    await fresh.release();
  });

  it('a SIGSTOPped holder process, resumed after a takeover, finds its lock lost and touches nothing', async () => {
    const key = 'stopped';
    const [worker] = await LockWorker.startMany(1, { settings: db.settings, options: target.options({ leaseMs: 600 }) });
    let stopped = false;
    try {
      let acquired!: () => void;
      const acquiredSeen = new Promise<void>((resolve) => (acquired = resolve));
      const outcome = worker!.run<StaleOutcome>(SCENARIO, 'holdUntilLost', { key }, (event) => {
        if (event === 'acquired') acquired();
      });
      await acquiredSeen;
      worker!.signal('SIGSTOP');
      stopped = true;
      const fresh = await freshLocks.acquire(key, { leaseMs: 30_000, timeoutMs: 10_000 });
      await stall(freshLocks, fresh);
      assert.equal(fresh.fencingToken, 2);
      const before = await db.logRows(key);
      worker!.signal('SIGCONT');
      stopped = false;
      const result = await outcome;
      assert.equal(result.fencingToken, 1);
      assert.equal(result.signalAborted, true);
      assert.equal(result.abortReason, 'LockLostError');
      assert.deepEqual(result.extendError, { name: 'LockLostError', key, fencingToken: 1 });
      assert.deepEqual(result.releaseError, { name: 'LockLostError', key, fencingToken: 1 });
      await assertUntouched(key, before, fresh);
      await fresh.release();
    } finally {
      if (stopped) worker!.signal('SIGCONT');
      await worker!.close();
    }
  });

  it('a holder stalled inside a timer callback past its lease reads its signal aborted on the next answer, before its timers run again', async () => {
    // A stall (a blocked event loop, SIGSTOP) that begins inside the timers phase leaves the loop's
    // clock behind: the watchdog's overdue deadline timer runs only in the next timers phase, after
    // the I/O of this one. A statement sent right after the stall is answered first; a holder that
    // reads its signal there must already see its lease over (the database may have let another in).
    const lock = await staleLocks.acquire('stalled-in-timer', { leaseMs: 300 });
    const deadline = (lock as unknown as { localDeadline: number }).localDeadline;
    const seen = await new Promise<{ aborted: boolean; late: boolean }>((resolve, reject) =>
      setTimeout(() => {
        while (performance.now() < deadline + 100) {
          /* stalled past the lease, inside this timer's callback */
        }
        db.query('SELECT 1').then(() => resolve({ aborted: lock.signal.aborted, late: performance.now() > deadline }), reject);
      }, 0),
    );
    assert.ok(seen.late, 'the read came after the local deadline');
    assert.equal(seen.aborted, true, 'the signal read after the stall says the lease ran out');
    assert.ok(lock.signal.reason instanceof LockLostError, String(lock.signal.reason));
    await assert.rejects(lock.release(), LockLostError);
  });
});
