import 'reflect-metadata';
import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { Injectable, type INestApplicationContext } from '@nestjs/common';
import { TestDatabase } from '../support/test-database.js';
import { createLockApp, eventually } from '../support/lock-app.js';
import { callerTrips } from '../support/round-trips.js';
import {
  DbLockOptionsError,
  getLockMetadata,
  InvalidLockKeyError,
  type LockEvent,
  LockService,
  LockTimeoutError,
  MAX_SEMAPHORE_LIMIT,
  Semaphore,
  SemaphoreLimitError,
} from '../../lib/index.js';
import { contractSuite } from '../support/contract-targets.js';

/**
 * Semaphore calls in one process: bad input refused before any SQL, reentrancy without a round
 * trip, a key is a lock or a semaphore (never both at once), the decorator's fenced transaction
 * and onLocked 'skip', events and stats.
 */
@Injectable()
class Exporter {
  constructor(readonly locks: LockService) {}
  inside = 0;
  peak = 0;

  @Semaphore('export:{0}', 2, { onLocked: 'skip', timeoutMs: 300 })
  async run(tenant: string, release: Promise<void>): Promise<number | undefined> {
    this.peak = Math.max(this.peak, ++this.inside);
    await this.locks.manager.query('SELECT 1');
    await release;
    this.inside--;
    return this.locks.currentLock!.fencingToken;
  }
}

contractSuite('semaphore-calls', 'semaphore calls (one process)', { postgres: true }, (target) => {
  let db: TestDatabase;
  let app: INestApplicationContext;
  let locks: LockService;
  const events: LockEvent[] = [];

  before(async () => {
    db = await TestDatabase.forTarget(target);
    const onEvent = (event: LockEvent) => void events.push(event);
    ({ app, locks } = await createLockApp(db.settings, target.options({ janitor: false, leaseMs: 5_000, onEvent }), { providers: [Exporter] }));
  });
  after(async () => {
    await app?.close();
    await db?.drop();
  });

  it('bad limits, keys and options: a typed error before any SQL, nothing written', async () => {
    const trips = callerTrips(locks);
    for (const limit of [0, -1, 1.5, NaN, Infinity, '3', null, undefined, MAX_SEMAPHORE_LIMIT + 1]) {
      await assert.rejects(locks.acquireSemaphore('bad', limit as number), DbLockOptionsError, `limit ${String(limit)}`);
      await assert.rejects(
        locks.withSemaphore('bad', limit as number, () => 1),
        DbLockOptionsError,
      );
      await assert.rejects(
        locks.runSemaphore('bad', limit as number, () => 1),
        DbLockOptionsError,
      );
    }
    for (const key of ['', 42, ['a', 'b'], 'x'.repeat(192), '\uD800'])
      await assert.rejects(locks.acquireSemaphore(key as string, 3), InvalidLockKeyError, `key ${String(key)}`);
    for (const options of [{ mode: 'write' }, { strategy: 'row-lock' }, { timeoutMs: -1 }, { leaseMs: 1 }, { wat: 1 }, 'x'])
      await assert.rejects(locks.acquireSemaphore('bad', 3, options as never), DbLockOptionsError, JSON.stringify(options));
    await assert.rejects(locks.withSemaphore('bad', 3, 'not a function' as never), DbLockOptionsError);
    assert.throws(() => Semaphore('k', 0), DbLockOptionsError);
    assert.throws(() => Semaphore(['a', 'b'] as never, 2), DbLockOptionsError);
    assert.throws(() => Semaphore('k', 2, { mode: 'read' } as never), DbLockOptionsError);
    assert.equal(callerTrips(locks), trips, 'no round trip');
    assert.deepEqual(await db.query('SELECT * FROM db_lock_log'), []);
    assert.deepEqual(await db.query('SELECT * FROM db_lock'), []);
  });

  it('reentrancy: a chain holding a permit re-enters without a round trip; another limit or a lock of the key is refused', async () => {
    await locks.withSemaphore('re', 3, async (outer) => {
      assert.equal(outer.limit, 3);
      assert.equal(outer.reentrant, false);
      const trips = callerTrips(locks);
      const inner = await locks.withSemaphore('re', 3, (permit) => permit);
      assert.equal(inner.reentrant, true);
      assert.equal(inner.fencingToken, outer.fencingToken);
      await assert.rejects(
        locks.withSemaphore('re', 4, () => 1),
        (e: unknown) => e instanceof SemaphoreLimitError && e.currentLimit === 3,
      );
      await assert.rejects(
        locks.withLock('re', () => 1),
        (e: unknown) => e instanceof SemaphoreLimitError && e.limit === null,
      );
      assert.equal(callerTrips(locks), trips, 'no round trip');
    });
    await locks.withLock('re-lock', async () => {
      await assert.rejects(
        locks.withSemaphore('re-lock', 2, () => 1),
        (e: unknown) => e instanceof SemaphoreLimitError && e.currentLimit === null,
      );
    });
  });

  it('a key is a lock or a semaphore, never both at once: each waits for the other', async () => {
    const lock = await locks.acquire('both', { mode: 'write' });
    await assert.rejects(locks.acquireSemaphore('both', 3, { timeoutMs: 0 }), LockTimeoutError);
    await lock.release();
    const read = await locks.acquire('both', { mode: 'read' });
    await assert.rejects(locks.acquireSemaphore('both', 3, { timeoutMs: 0 }), LockTimeoutError);
    await read.release();
    const permit = await locks.acquireSemaphore('both', 3, { timeoutMs: 0 });
    await assert.rejects(locks.acquire('both', { mode: 'read', timeoutMs: 0 }), LockTimeoutError);
    await assert.rejects(locks.acquire('both', { mode: 'write', timeoutMs: 0 }), LockTimeoutError);
    await permit.release();
    (await locks.acquire('both', { mode: 'read', timeoutMs: 0 })).release();
  });

  it('limit reached: timeouts, maxAttempts; a release lets the next one in', async () => {
    const held = [await locks.acquireSemaphore('full', 2), await locks.acquireSemaphore('full', 2)];
    assert.deepEqual(
      held.map((p) => p.fencingToken),
      [1, 2],
    );
    const started = performance.now();
    await assert.rejects(locks.acquireSemaphore('full', 2, { timeoutMs: 200 }), LockTimeoutError);
    assert.ok(performance.now() - started >= 195, 'waited its budget');
    await assert.rejects(locks.acquireSemaphore('full', 2, { timeoutMs: 60_000, maxAttempts: 2 }), LockTimeoutError);
    const waiting = locks.acquireSemaphore('full', 2, { timeoutMs: 10_000 });
    await held[0]!.release();
    const third = await waiting;
    assert.ok(third.fencingToken > 2);
    await Promise.all([held[1]!.release(), third.release()]);
  });

  it('@Semaphore: fenced transaction, at most 2 at once, onLocked skip resolves undefined; events and metadata', async () => {
    const exporter = app.get(Exporter);
    events.length = 0;
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    const first = exporter.run('t1', gate);
    const second = exporter.run('t1', gate);
    await eventually(() => exporter.inside === 2, 10_000, 'two permits held');
    const skipped = await exporter.run('t1', Promise.resolve());
    assert.equal(skipped, undefined, 'a third call is skipped');
    open();
    const tokens = await Promise.all([first, second]);
    assert.equal(exporter.peak, 2);
    assert.deepEqual(new Set(tokens).size, 2);
    const stats = locks.stats();
    assert.ok(stats.skipped >= 1);
    const rows = await db.logRows('export:t1');
    assert.deepEqual(
      rows.map((r) => r.status),
      ['RELEASED', 'RELEASED'],
    );
    const metadata = getLockMetadata(Exporter.prototype.run);
    assert.equal(metadata?.decorator, 'Semaphore');
    assert.equal(metadata?.limit, 2);
    const kinds = events.filter((e) => e.keys?.includes('export:t1')).map((e) => e.type);
    assert.deepEqual(kinds.filter((k) => k === 'acquired').length, 2, JSON.stringify(kinds));
    assert.deepEqual(kinds.filter((k) => k === 'skipped').length, 1, JSON.stringify(kinds));
  });
});
