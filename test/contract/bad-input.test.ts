import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import { ownLogRow, TestDatabase } from '../support/test-database.js';
import { createLockApp } from '../support/lock-app.js';
import { callerTrips, countsLockTrips } from '../support/round-trips.js';
import { DbLockError, DbLockOptionsError, InvalidLockKeyError, type LockHandle, type LockService } from '../../lib/index.js';
import { contractSuite } from '../support/contract-targets.js';
import { BAD_CALL_OPTIONS, BAD_KEYS, KEY_ROOM, NAMESPACE } from '../support/bad-inputs.js';

/**
 * Bad input: an invalid key or option is rejected with a typed error before any SQL runs: the
 * library's round-trip counter does not move and no row is written.
 */
contractSuite('bad-input', 'bad input is rejected before any SQL', { postgres: true }, (target) => {
  let db: TestDatabase;
  let app: INestApplicationContext;
  let locks: LockService;
  before(async () => {
    db = await TestDatabase.forTarget(target);
    // No janitor: its cluster-wide lock goes through the lock path, and a tick mid-test would add to the lock round trips counted here.
    ({ app, locks } = await createLockApp(db.settings, target.options({ namespace: NAMESPACE, janitor: false })));
  });
  after(async () => {
    await app?.close();
    await db?.drop();
  });

  async function rowCounts(): Promise<[number, number]> {
    const [a] = await db.query<{ n: number }[]>('SELECT COUNT(*) AS n FROM db_lock');
    const [b] = await db.query<{ n: number }[]>('SELECT COUNT(*) AS n FROM db_lock_log');
    return [Number(a!.n), Number(b!.n)];
  }

  /** Runs every call, expecting each to reject with `type` and no round trip, and no new rows overall. */
  async function expectRejectedWithoutSql(calls: (() => Promise<unknown>)[], check: (error: unknown) => void): Promise<void> {
    const rowsBefore = await rowCounts();
    for (const call of calls) {
      const roundTrips = callerTrips(locks);
      let caught: unknown;
      try {
        await call();
      } catch (error) {
        caught = error;
      }
      assert.ok(caught !== undefined, 'the call did not reject');
      check(caught);
      assert.equal(callerTrips(locks), roundTrips, `SQL was sent before rejecting: ${String(caught)}`);
    }
    assert.deepEqual(await rowCounts(), rowsBefore, 'rows were written');
  }

  it('control: a valid call moves the round-trip counter and writes a log row', async () => {
    const [trips, [, logRows]] = [callerTrips(locks), await rowCounts()];
    await (await locks.acquire('control', { timeoutMs: 0 })).release();
    // A row-lock take runs on DataSource connections, which the counter does not see (countsLockTrips).
    if (countsLockTrips(target)) assert.ok(callerTrips(locks) > trips, 'a grant and a release made no counted round trip');
    assert.equal((await rowCounts())[1], logRows + 1, 'the hold wrote no log row');
  });

  for (const [label, key] of BAD_KEYS) {
    it(`key: ${label}`, async () => {
      let ran = false;
      const calls: (() => Promise<unknown>)[] = [
        () => locks.acquire(key as never),
        () => locks.tryAcquire(key as never),
        () =>
          locks.withLock(key as never, async () => {
            ran = true;
          }),
        () => locks.acquire(key as never, { timeoutMs: 0, mode: 'read' }),
      ];
      if (!Array.isArray(key)) calls.push(() => locks.inspect(key as never));
      await expectRejectedWithoutSql(calls, (error) => {
        assert.ok(error instanceof InvalidLockKeyError, `expected InvalidLockKeyError, got ${String(error)}`);
        assert.ok(error instanceof DbLockError);
        assert.equal(error.name, 'InvalidLockKeyError');
        assert.ok(error.reason.length > 0);
      });
      assert.equal(ran, false, 'withLock ran its function for a bad key');
    });
  }

  it('key: a mode other than read/write in a key spec', async () => {
    await expectRejectedWithoutSql([() => locks.acquire([{ key: 'a', mode: 'exclusive' as never }])], (error) => {
      assert.ok(error instanceof DbLockOptionsError, String(error));
      assert.match(error.problems.join('\n'), /mode must be 'read' or 'write', got 'exclusive'/);
    });
  });

  it('inspect() takes one key, not an array', async () => {
    await expectRejectedWithoutSql([() => locks.inspect(['a', 'b'] as never)], (error) => {
      assert.ok(error instanceof InvalidLockKeyError, String(error));
    });
  });

  for (const [label, options, patterns] of BAD_CALL_OPTIONS) {
    it(`options: ${label}`, async () => {
      let ran = false;
      const calls: (() => Promise<unknown>)[] = [
        () => locks.acquire('valid', options as never),
        () =>
          locks.withLock(
            'valid',
            async () => {
              ran = true;
            },
            options as never,
          ),
      ];
      // tryAcquire has no timeoutMs (it is refused there as unknown: see below).
      if (typeof options !== 'object' || options === null || !('timeoutMs' in options)) calls.push(() => locks.tryAcquire('valid', options as never));
      await expectRejectedWithoutSql(calls, (error) => {
        assert.ok(error instanceof DbLockOptionsError, `expected DbLockOptionsError, got ${String(error)}`);
        assert.equal(error.name, 'DbLockOptionsError');
        assert.equal(error.problems.length, patterns.length, error.message);
        for (const pattern of patterns) assert.match(error.message, pattern);
      });
      assert.equal(ran, false);
    });
  }

  it('tryAcquire refuses timeoutMs (it never waits) and lists it with the other problems', async () => {
    await expectRejectedWithoutSql([() => locks.tryAcquire('valid', { timeoutMs: 100 } as never)], (error) => {
      assert.ok(error instanceof DbLockOptionsError, String(error));
      assert.deepEqual(error.problems.length, 1);
      assert.match(error.message, /unknown option 'timeoutMs'/);
    });
    await expectRejectedWithoutSql([() => locks.tryAcquire('valid', { timeoutMs: 0, leaseMs: NaN } as never)], (error) => {
      assert.ok(error instanceof DbLockOptionsError, String(error));
      assert.equal(error.problems.length, 2, error.message);
    });
  });

  it('withLock without a function is rejected before any SQL', async () => {
    await expectRejectedWithoutSql([() => locks.withLock('valid', 'not a function' as never)], (error) => {
      assert.ok(error instanceof DbLockOptionsError, String(error));
    });
  });

  describe('extend() with a bad lease', () => {
    let lock: LockHandle;
    before(async () => {
      lock = await locks.acquire('extend-me', { leaseMs: 5_000 });
    });
    after(async () => {
      await lock?.release();
    });
    for (const lease of [NaN, -1, 0, 99, 1.5, 2 ** 31, Infinity, '1000']) {
      it(`extend(${String(lease)})`, async () => {
        const [row] = await db.logRows(`${NAMESPACE}:extend-me`);
        await expectRejectedWithoutSql([() => lock.extend(lease as never)], (error) => {
          assert.ok(error instanceof DbLockOptionsError, `expected DbLockOptionsError, got ${String(error)}`);
          assert.match(error.message, /leaseMs/);
        });
        // The lock's own row (expires_at, lease_ms: what extend writes) must be untouched. The
        // derived lease end also follows the process lease, which the watchdog renews on its own
        // timer and may move between the two reads: leave it out.
        assert.deepEqual(ownLogRow((await db.logRows(`${NAMESPACE}:extend-me`))[0]), ownLogRow(row), 'the lease changed');
        assert.equal(lock.signal.aborted, false);
      });
    }
  });

  it('the longest keys are accepted and stored exactly, never truncated', async () => {
    for (const key of ['x'.repeat(KEY_ROOM), '🔒'.repeat(KEY_ROOM)]) {
      const lock = await locks.acquire(key, { timeoutMs: 0 });
      assert.deepEqual(lock.keys, [key]);
      const [row] = await db.query<{ lock_key: Buffer }[]>('SELECT lock_key FROM db_lock WHERE lock_key = ?', [Buffer.from(`${NAMESPACE}:${key}`)]);
      assert.equal(row!.lock_key.toString('utf8'), `${NAMESPACE}:${key}`);
      // A row-lock holder has no live row before its commit: inspect() lists lease holders only.
      if (!target.capabilities.has('holder-connection')) assert.equal((await locks.inspect(key)).holders.length, 1);
      await lock.release();
      // The hold's log row keeps the whole key too.
      const rows = await db.logRows(`${NAMESPACE}:${key}`);
      assert.deepEqual(
        rows.map((r) => [(r.lock_key as Buffer).toString('utf8'), r.status]),
        [[`${NAMESPACE}:${key}`, 'RELEASED']],
      );
    }
  });
});
