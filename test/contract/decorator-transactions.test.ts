import 'reflect-metadata';
import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import { DbLockError, type LockEvent, LockLostError, LockService, LockUpgradeError } from '../../lib/index.js';
import { createLockApp, endedStatuses } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';
import { callerTrips } from '../support/round-trips.js';
import { appliesTo, contractSuite, gapOf } from '../support/contract-targets.js';
import { Accounts } from './scenarios/decorated-accounts.js';
import { BusinessError, createEntries, entriesOf } from './scenarios/entries.js';

contractSuite('fenced-decorators', 'decorators: fenced REQUIRES_NEW transactions in one process', { postgres: true }, (target) => {
  let db: TestDatabase;
  let app: INestApplicationContext;
  let locks: LockService;
  let accounts: Accounts;
  const events: LockEvent[] = [];

  before(async () => {
    db = await TestDatabase.forTarget(target);
    await createEntries(db);
    // Long lease: no renewal lands inside the round-trip measurements.
    ({ app, locks } = await createLockApp(db.settings, target.options({ leaseMs: 30_000, janitor: false, onEvent: (e) => events.push(e) }), {
      providers: [Accounts],
    }));
    accounts = app.get(Accounts);
  });
  after(async () => {
    await app?.close();
    await db?.drop();
  });

  const entries = (k: string): Promise<string[]> => entriesOf(db, k);

  it('a nested same-key call costs 0 lock round trips and joins the outer transaction', async () => {
    const result = await accounts.outer(1);
    assert.equal(result.roundTrips, 0, 'no lock statement for the nested call');
    assert.equal(accounts.innerReentrant, true);
    assert.ok(result.sameManager, 'the nested call ran in the outer transaction (same EntityManager)');
    assert.deepEqual(await entries('acct:1'), ['outer', 'inner']);
    const rows = await db.logRows('acct:1');
    assert.deepEqual(
      rows.map((r) => r.status),
      ['RELEASED'],
      'one grant, one log row',
    );
  });

  it('a joined nested call shares the outer outcome: outer fails after it, its writes are rolled back too', async () => {
    await assert.rejects(accounts.outer(2, true), BusinessError);
    assert.deepEqual(await entries('acct:2'), []);
    assert.deepEqual(await endedStatuses(db, 'acct:2'), ['FAILED']);
  });

  it('read then write on one key in one chain: LockUpgradeError at once, no lock statement', async () => {
    await assert.rejects(accounts.readThenWrite(3), LockUpgradeError);
    assert.equal(accounts.upgradeRoundTrips, 0);
    assert.deepEqual(await entries('acct:3'), []);
    assert.deepEqual(await endedStatuses(db, 'acct:3'), ['FAILED']);
  });

  it('a nested call on another key joins too; its lock is fenced and released with the outer transaction', async () => {
    const result = await accounts.outerWithOther(4, 5);
    assert.ok(result.sameManager);
    assert.ok(result.otherHeldAfterInner, 'the nested key stays held until the outer transaction ends');
    assert.deepEqual(await entries('acct:5'), ['inner']);
    assert.deepEqual(
      (await db.logRows('acct:5')).map((r) => r.status),
      ['RELEASED'],
    );
    const next = await locks.tryAcquire('acct:5');
    assert.ok(next, 'and is free once it has');
    await next.release();
  });

  it('two call chains in one process still exclude each other', async () => {
    const trace: string[] = [];
    await Promise.all(['a', 'b', 'c'].map((name) => accounts.chain(name, trace)));
    for (let i = 0; i < trace.length; i += 2) assert.equal(trace[i]!.slice(3), trace[i + 1]!.slice(4), trace.join(' '));
  });

  it('business error: rolled back, lock free at once, log row FAILED, original error rethrown', async () => {
    const error = await accounts.failing(6).then(
      () => undefined,
      (e: unknown) => e,
    );
    assert.ok(error instanceof BusinessError && error.message === 'failed on 6', 'the very error the method threw');
    assert.deepEqual(await entries('acct:6'), [], 'its write was rolled back');
    const next = await locks.tryAcquire('acct:6');
    assert.ok(next, 'the lock is free at once');
    await next.release();
    assert.deepEqual(
      (await db.logRows('acct:6')).map((r) => r.status),
      ['FAILED', 'RELEASED'],
    );
  });

  it("transaction 'none': the lock only; token and signal reachable, no manager", async () => {
    const result = await accounts.outsideDb();
    assert.ok(result.token >= 1);
    assert.equal(result.signal.aborted, false);
    if (!gapOf('transaction-none', target)) assert.ok(result.managerError instanceof DbLockError);
    assert.deepEqual(
      (await db.logRows('none')).map((r) => r.status),
      ['RELEASED'],
    );
  });

  it("onLocked 'skip': not run, resolves undefined, counted and reported", async () => {
    const skippedBefore = locks.stats().skipped;
    const timedOutBefore = locks.stats().timedOut;
    const eventsBefore = events.length;
    const held = await locks.acquire('job');
    try {
      assert.equal(await accounts.job(), undefined);
    } finally {
      await held.release();
    }
    assert.equal(locks.stats().skipped, skippedBefore + 1);
    assert.ok(events.some((e) => e.type === 'skipped' && e.keys[0] === 'job'));
    // A skip is reported as a skip only, not also as a timeout.
    assert.equal(locks.stats().timedOut, timedOutBefore);
    assert.ok(!events.slice(eventsBefore).some((e) => e.type === 'timed-out'));
    assert.equal(await accounts.job(), 'ran');
  });

  // The loss is forged by ending the lease row, as a takeover would: only leases are taken over.
  if (appliesTo('lease-takeover', target))
    it('a lock held by an outer withLock is fenced by each nested REQUIRES_NEW call, and a lost one rolls back', async () => {
      await locks
        .withLock('acct:7', async (outer) => {
          await accounts.inner(7); // first fence: ACQUIRED -> COMPLETED
          await accounts.inner(7); // second fence on the same rows (already COMPLETED): the locking re-check passes
          assert.deepEqual(await entries('acct:7'), ['inner', 'inner']);
          // Another holder reclaims the key (as a takeover would): the next fenced commit must fail.
          const [owner] = (await db.logRows('acct:7')).map((r) => String(r.owner));
          await db.query(`UPDATE db_lock_log SET status = 'EXPIRED' WHERE owner = ?`, [owner]);
          await assert.rejects(accounts.inner(7), LockLostError);
          assert.deepEqual(await entries('acct:7'), ['inner', 'inner'], 'the third write was rolled back');
          assert.equal(outer.fencingToken, 1);
        })
        .catch((error: unknown) => {
          // The outer lock was taken away from it: its release says so.
          if (!(error instanceof LockLostError)) throw error;
        });
    });

  it('programmatic runLocked and the decorators validate options before any SQL', async () => {
    const before = callerTrips(locks);
    await assert.rejects(
      locks.runLocked('x', () => 1, { transaction: 'nested' as 'none' }),
      DbLockError,
    );
    await assert.rejects(
      locks.runLocked('x', () => 1, { isolationLevel: 'SNAPSHOT' as 'READ COMMITTED' }),
      DbLockError,
    );
    await assert.rejects(
      locks.runLocked('', () => 1),
      DbLockError,
    );
    assert.equal(callerTrips(locks), before);
    await accounts.plain();
  });
});
