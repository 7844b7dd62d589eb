import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import { LockLostError, LockTimeoutError, type LockService } from '../../lib/index.js';
import { createLockApp } from '../support/lock-app.js';
import { stall } from '../support/lock-internals.js';
import { runSql } from '../support/portable-sql.js';
import { TestDatabase } from '../support/test-database.js';
import { LockWorker } from '../support/worker-host.js';
import type { LedgerArgs, LedgerResult } from './scenarios/ledger.js';
import { contractSuite } from '../support/contract-targets.js';

/**
 * One key taken by both strategies excludes both ways, observed through the public API and a
 * business table. A row-lock holder's lock is an InnoDB lock on the key's db_lock row, the row
 * every lease grant locks before deciding: a lease caller waits for as long as the row-lock
 * transaction is open, even while its process is stopped. A lease holder is a live log row, which
 * the row-lock's locking statement checks once it has the row: a row-lock caller waits until the
 * lease holder releases, or takes the key over once its lease ran out. Tokens keep growing across
 * strategies.
 */
const SCENARIO = new URL('./scenarios/ledger.js', import.meta.url).href;
const STALL_MS = 3_000;
/**
 * The lease caller's own lease: shorter than the stall, so a grant blocked through it answers with
 * its lease run out and is given back; long enough that the grant after it keeps its lease through
 * the fenced INSERT on a loaded 2-core machine (with 600 ms, a renewal came late once in a full run).
 */
const CALLER_LEASE_MS = 2_000;

contractSuite('mixed-strategies', 'mixed strategies on one key', { postgres: true }, (target) => {
  let db: TestDatabase;
  let lease: { app: INestApplicationContext; locks: LockService };
  let rowLock: { app: INestApplicationContext; locks: LockService };
  let worker: LockWorker;
  before(async () => {
    db = await TestDatabase.forTarget(target);
    await db.query(`CREATE TABLE ledger (id ${db.sql.autoId}, who VARCHAR(16), step INT, token INT)${db.sql.tableOptions}`);
    lease = await createLockApp(db.settings, { strategy: 'lease', leaseMs: 600 });
    rowLock = await createLockApp(db.settings, { strategy: 'row-lock' });
    worker = await LockWorker.start({ settings: db.settings, options: { strategy: 'row-lock', leaseMs: 600 } });
  });
  after(async () => {
    worker?.signal('SIGCONT');
    await worker?.close();
    await lease?.app.close();
    await rowLock?.app.close();
    await db?.drop();
  });

  const ledger = async (): Promise<string[]> =>
    (await db.query<{ who: string; step: number; token: number }[]>('SELECT who, step, token FROM ledger ORDER BY id')).map(
      (r) => `${r.who}:${r.step}:${r.token}`,
    );

  it(`a lease caller waits behind a row-lock holder stopped for ${STALL_MS} ms, then commits after it`, async () => {
    const key = 'mixed:row-first';
    let acquired!: () => void;
    const acquiredSeen = new Promise<void>((resolve) => (acquired = resolve));
    const held = worker.run<LedgerResult>(SCENARIO, 'writeTwice', { key, who: 'row', pauseMs: 100 } satisfies LedgerArgs, (event) => {
      if (event === 'acquired') acquired();
    });
    await acquiredSeen;
    worker.signal('SIGSTOP');
    let leaseDone = false;
    const taken = lease.locks
      .runLocked(
        key,
        async () => {
          await runSql(lease.locks.manager, "INSERT INTO ledger (who, step, token) VALUES ('lease', 1, ?)", [lease.locks.currentLock!.fencingToken]);
        },
        { timeoutMs: 30_000, leaseMs: CALLER_LEASE_MS },
      )
      .finally(() => (leaseDone = true));
    const stalledAt = performance.now();
    try {
      while (performance.now() - stalledAt < STALL_MS) {
        assert.equal(leaseDone, false, 'the lease caller got in while the row-lock holder was stopped');
        assert.deepEqual(await ledger(), []);
        await new Promise((r) => setTimeout(r, 100));
      }
    } finally {
      worker.signal('SIGCONT');
    }
    const [row] = await Promise.all([held, taken]);
    assert.equal(row.signalAborted, false);
    const entries = await ledger();
    assert.deepEqual(entries.slice(0, 2), ['row:1:1', 'row:2:1']);
    assert.equal(entries.length, 3);
    const leaseToken = Number(entries[2]!.split(':')[2]);
    assert.ok(
      entries[2]!.startsWith('lease:1:') && leaseToken > 1,
      `the lease caller wrote after the row-lock holder, with a newer token: ${entries[2]}`,
    );
    // A lease grant blocked on the key row past its own leaseMs (CALLER_LEASE_MS < the stall) answers with a
    // lease already run out: it is given back (its token burned) and the next try is the grant.
    const rows = (await db.logRows(key)).map((r) => [r.strategy, r.status, Number(r.fencing_token)]);
    assert.deepEqual(rows[0], ['row-lock', 'RELEASED', 1]);
    assert.deepEqual(rows.at(-1), ['lease', 'RELEASED', leaseToken]);
    for (const r of rows.slice(1, -1)) assert.deepEqual(r.slice(0, 2), ['lease', 'RELEASED'], 'only given-back lease grants in between');
  });

  it('a row-lock caller times out (sub-second) while a lease holder is live, and gets the key once it is released', async () => {
    const key = 'mixed:lease-first';
    const held = await lease.locks.acquire(key, { leaseMs: 30_000 });
    assert.equal(await rowLock.locks.tryAcquire(key), null);
    const started = performance.now();
    await assert.rejects(rowLock.locks.acquire(key, { timeoutMs: 300 }), LockTimeoutError);
    const elapsed = performance.now() - started;
    assert.ok(elapsed >= 299 && elapsed < 300 + 250, `timeout 300 ms took ${Math.round(elapsed)} ms`);
    const next = rowLock.locks.acquire(key, { timeoutMs: 10_000 });
    await held.release();
    const lock = await next;
    assert.equal(lock.strategy, 'row-lock');
    assert.equal(lock.fencingToken, 2);
    await lock.release();
    assert.deepEqual(
      (await db.logRows(key)).map((r) => [r.strategy, r.status, Number(r.fencing_token)]),
      [
        ['lease', 'RELEASED', 1],
        ['row-lock', 'RELEASED', 2],
      ],
    );
  });

  it('a row-lock caller takes over a lease holder whose lease ran out unrenewed', async () => {
    const key = 'mixed:dead-lease';
    const dead = await lease.locks.acquire(key, { leaseMs: 300 });
    await stall(lease.locks, dead); // renewals stop, as for a dead process
    const lock = await rowLock.locks.acquire(key, { timeoutMs: 10_000 });
    assert.equal(lock.fencingToken, 2);
    await lock.release();
    const rows = await db.logRows(key);
    assert.deepEqual(
      rows.map((r) => [r.strategy, r.status, Number(r.fencing_token)]),
      [
        ['lease', 'EXPIRED', 1],
        ['row-lock', 'RELEASED', 2],
      ],
    );
    assert.match(String(rows[0]!.note), /taken over by row-lock/);
    // Its own release now finds its row ended: the stale holder touches nothing.
    await assert.rejects(dead.release(), LockLostError);
    assert.deepEqual(
      (await db.logRows(key)).map((r) => r.status),
      ['EXPIRED', 'RELEASED'],
    );
  });

  it('after row-lock writers, every kind of lease grant (one key, several keys, a read lock, a semaphore permit) keeps row-lock callers out while held', async () => {
    const grants: [string, (key: string) => Promise<{ release(): Promise<void> }>][] = [
      ['one key', (key) => lease.locks.acquire(key, { leaseMs: 30_000 })],
      ['several keys', (key) => lease.locks.acquire([key, `${key}:other`], { leaseMs: 30_000 })],
      ['a read lock', (key) => lease.locks.acquire(key, { mode: 'read', leaseMs: 30_000 })],
      ['a semaphore permit', (key) => lease.locks.acquireSemaphore(key, 2, { leaseMs: 30_000 })],
    ];
    for (const [what, grant] of grants) {
      const key = `mixed:after-row-lock:${what}`;
      // Two row-lock writers: the first reads the log (first use), the second takes the one-UPDATE path.
      await rowLock.locks.withLock(key, () => undefined);
      await rowLock.locks.withLock(key, () => undefined);
      const held = await grant(key);
      assert.equal(await rowLock.locks.tryAcquire(key), null, `${what}: a row-lock writer got in beside the lease holder`);
      await held.release();
      const lock = await rowLock.locks.tryAcquire(key);
      assert.ok(lock, `${what}: the key is free once the lease holder released`);
      assert.equal(lock.fencingToken, 4, `${what}: tokens grow across strategies`);
      await lock.release();
    }
  });
});
