import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import type mysql from 'mysql2/promise';
import { DbLockError, LockLostError, type LockService } from '../../lib/index.js';
import { createLockApp, eventually } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';
import { bounded, describeError } from '../support/settled.js';

/**
 * A held lock whose lifeline the server cuts: a row-lock holder's connection killed (KILL
 * CONNECTION) while it holds the key from acquire(), and a lease holder whose renewals are held up
 * (its process row locked) past its lease. The signal aborts, release()/extend() fail with a typed
 * error (LockLostError), stats agree (held 0, acquired = released + lost + held), and the key is
 * free to another process at once (row-lock) or once the lease ran out (lease), never to two holders.
 */

const outcome = <T>(p: Promise<T>) =>
  p.then(
    (value) => ({ value, error: undefined as unknown, ok: true }),
    (error: unknown) => ({ value: undefined as T | undefined, error, ok: false }),
  );

function assertStatsConsistent(locks: LockService, what: string): void {
  const s = locks.stats();
  assert.equal(
    s.held,
    0,
    `${what}: held back to 0 (stats ${JSON.stringify({ held: s.held, acquired: s.acquired, released: s.released, lost: s.lost })})`,
  );
  assert.equal(
    s.acquired,
    s.released + s.lost + s.held,
    `${what}: acquired (${s.acquired}) = released (${s.released}) + lost (${s.lost}) + held (${s.held})`,
  );
}

describe('a held lock whose lifeline the server cuts', () => {
  let db: TestDatabase;
  let locker: mysql.Connection;
  const apps: INestApplicationContext[] = [];

  before(async () => {
    db = await TestDatabase.create();
    locker = await db.session();
  });
  after(async () => {
    await locker?.query('ROLLBACK').catch(() => undefined);
    for (const app of apps) await app.close().catch(() => undefined);
    await db?.drop();
  });

  it('row-lock: the holder connection of acquire() killed: signal aborts, release() typed, key free at once, stats agree', async () => {
    const { app, locks } = await createLockApp(db.settings, { strategy: 'row-lock', janitor: false });
    const { app: otherApp, locks: other } = await createLockApp(db.settings, { strategy: 'row-lock', janitor: false });
    apps.push(app, otherApp);
    const key = 'row-killed';
    await (await other.acquire(key)).release();
    const lock = await locks.acquire(key);
    const open = await db.openTransactions();
    assert.equal(open.length, 1, 'one open transaction: the holder');
    await db.query(`KILL CONNECTION ${open[0]!.threadId}`);
    await eventually(() => lock.signal.aborted, 5_000, 'the signal to abort').catch(() =>
      assert.fail('the signal never aborted after the connection was killed'),
    );
    const started = performance.now();
    const got = await bounded(other.acquire(key, { timeoutMs: 3_000 }), 5_000, 'the other acquire');
    assert.ok(performance.now() - started < 2_000, 'free at once');
    const ext = await bounded(outcome(lock.extend(5_000)), 5_000, 'extend');
    const rel = await bounded(outcome(lock.release()), 5_000, 'release');
    await got.release();
    if (!ext.ok) assert.ok(ext.error instanceof DbLockError, `extend typed: got ${describeError(ext.error)}`);
    assert.ok(!rel.ok, 'release of a lost lock tells the caller');
    assert.ok(rel.error instanceof LockLostError, `release: LockLostError, got ${describeError(rel.error)}`);
    assertStatsConsistent(locks, 'row-lock holder killed');
  });

  it('row-lock: the holder connection killed inside withLock: withLock rejects typed, nothing committed, stats agree', async () => {
    const { app, locks } = await createLockApp(db.settings, { strategy: 'row-lock', janitor: false });
    apps.push(app);
    await db.query('CREATE TABLE IF NOT EXISTS work6 (tag VARCHAR(32)) ENGINE=InnoDB');
    const key = 'row-killed-with';
    const result = await bounded(
      outcome(
        locks.withLock(key, async () => {
          await locks.manager.query(`INSERT INTO work6 VALUES ('with')`);
          const [row] = await locks.manager.query('SELECT CONNECTION_ID() AS id');
          await db.query(`KILL CONNECTION ${Number(row.id)}`);
          await new Promise((r) => setTimeout(r, 300));
        }),
      ),
      10_000,
      'withLock',
    );
    const n = await db.query<{ n: number }[]>(`SELECT COUNT(*) AS n FROM work6 WHERE tag = 'with'`);
    assert.equal(Number(n[0]!.n), 0, 'nothing committed');
    assert.ok(!result.ok, 'withLock failed');
    assert.ok(result.error instanceof DbLockError, `typed: got ${describeError(result.error)}`);
    assertStatsConsistent(locks, 'row-lock withLock killed');
  });

  it('lease: renewals held up past the lease (process row locked): signal aborts first, release() LockLostError, stats agree, key free', async () => {
    const leaseMs = 2_000;
    const { app, locks } = await createLockApp(db.settings, { janitor: false, leaseMs });
    const { app: otherApp, locks: other } = await createLockApp(db.settings, { janitor: false, leaseMs });
    apps.push(app, otherApp);
    const key = 'lease-unrenewed';
    const lock = await locks.acquire(key);
    const [mine] = await db.query<{ process_id: unknown }[]>(`SELECT process_id FROM db_lock_log WHERE lock_key = ? AND fencing_token = ?`, [
      Buffer.from(key),
      lock.fencingToken,
    ]);
    const processId = mine?.process_id;
    assert.ok(processId !== undefined, 'the holder process row');
    let abortedAt = 0;
    lock.signal.addEventListener('abort', () => (abortedAt = performance.now()));
    await locker.query('START TRANSACTION');
    await locker.query('SELECT * FROM db_lock_process WHERE id = ? FOR UPDATE', [processId]);
    let grantedAt = 0;
    const taking = other.acquire(key, { timeoutMs: leaseMs * 4 }).then((l) => {
      grantedAt = performance.now();
      return l;
    });
    try {
      await eventually(() => abortedAt > 0, leaseMs * 3, 'the signal to abort').catch(() =>
        assert.fail('the signal did not abort although no renewal could land for 3 leases'),
      );
    } finally {
      await new Promise((r) => setTimeout(r, 500));
      await locker.query('ROLLBACK');
    }
    const got = await bounded(taking, leaseMs * 5, 'the other acquire');
    assert.ok(grantedAt >= abortedAt, 'never two holders: the other was granted after the signal aborted');
    const rel = await bounded(outcome(lock.release()), 10_000, 'release');
    await got.release();
    assert.ok(rel.error instanceof LockLostError, `release: LockLostError, got ${describeError(rel.error)}`);
    assertStatsConsistent(locks, 'lease unrenewed');
  });
});
