import { AsyncResource } from 'node:async_hooks';
import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import { TestDatabase } from '../support/test-database.js';
import { createLockApp } from '../support/lock-app.js';
import { LockUpgradeError, type LockService } from '../../lib/index.js';
import { callerTrips, countsLockTrips } from '../support/round-trips.js';
import { contractSuite } from '../support/contract-targets.js';

/** Reentrancy for modes: the matrix in one call chain, counted in round trips. */
contractSuite('reentrancy', 'read/write reentrancy matrix in one call chain', { postgres: true }, (target) => {
  let db: TestDatabase;
  let app: INestApplicationContext;
  let locks: LockService;
  /** Another app (its own pools, no call chain shared): what the holds look like from outside. */
  let otherApp: INestApplicationContext;
  let other: LockService;
  const outsideChains = new AsyncResource('outside-call-chains');
  before(async () => {
    db = await TestDatabase.forTarget(target);
    // A long lease: no watchdog round trip lands inside a measured window.
    // No janitor: its cluster-wide lock goes through the lock path, and a tick mid-test would add to the lock round trips counted here.
    ({ app, locks } = await createLockApp(db.settings, target.options({ leaseMs: 60_000, janitor: false })));
    ({ app: otherApp, locks: other } = await createLockApp(db.settings, target.options({ leaseMs: 60_000, janitor: false })));
  });
  after(async () => {
    await otherApp?.close();
    await app?.close();
    await db?.drop();
  });
  const trips = (): number => callerTrips(locks);
  // A row-lock holder has no live row before its commit: inspect() lists lease holders only.
  const listsHolders = !target.capabilities.has('holder-connection');
  const countsTrips = countsLockTrips(target);
  /** Whether another process could take `key` in `mode` right now (taken and given back if so). */
  const freeElsewhere = (key: string, mode: 'read' | 'write'): Promise<boolean> =>
    // Run in the async context of the suite's start, outside every call chain, or the chain's reentrancy would answer.
    outsideChains.runInAsyncScope(async () => {
      const lock = await other.tryAcquire(key, { mode });
      await lock?.release();
      return lock !== null;
    });

  it('write -> read runs under the write: no round trip, same token, one holder', async () => {
    await locks.withLock('loan:1', async (outer) => {
      const before = trips();
      const seen = await locks.withLock(
        'loan:1',
        async (inner) => {
          assert.equal(inner.reentrant, true);
          assert.equal(inner.mode, 'read');
          assert.equal(inner.fencingToken, outer.fencingToken);
          assert.equal(inner.signal, outer.signal, 'the nested hold is lost exactly when the outer one is');
          return trips();
        },
        { mode: 'read' },
      );
      assert.equal(seen - before, 0, 'entering the nested read cost no round trip');
      assert.equal(trips() - before, 0, 'nor did leaving it');
      assert.equal(await freeElsewhere('loan:1', 'read'), false, 'still held as a write: another reader is refused');
      if (listsHolders)
        assert.deepEqual(
          (await locks.inspect('loan:1')).holders.map((h) => h.mode),
          ['write'],
          'still one holder, the write',
        );
    });
    const rows = await db.logRows('loan:1');
    assert.deepEqual(
      rows.map((r) => [r.mode, r.status]),
      [['write', 'RELEASED']],
    );
  });

  it('read -> write is refused with LockUpgradeError before any SQL; the read stays held', async () => {
    await locks.withLock(
      'loan:2',
      async (outer) => {
        const before = trips();
        await assert.rejects(locks.acquire('loan:2', { mode: 'write' }), (error: unknown) => {
          assert.ok(error instanceof LockUpgradeError);
          assert.equal(error.name, 'LockUpgradeError');
          assert.equal(error.key, 'loan:2');
          return true;
        });
        await assert.rejects(
          locks.withLock('loan:2', () => 'never runs'),
          LockUpgradeError,
        );
        // Mixed multi-key request that includes the upgrade: refused as a whole, the other key untouched.
        await assert.rejects(
          locks.acquire([
            { key: 'other', mode: 'write' },
            { key: 'loan:2', mode: 'write' },
          ]),
          LockUpgradeError,
        );
        await assert.rejects(locks.tryAcquire('loan:2', { mode: 'write' }), LockUpgradeError, 'tryAcquire refuses it too (not null)');
        assert.equal(trips() - before, 0, 'no round trip for refused upgrades');
        assert.equal(outer.released, false);
        assert.equal(await freeElsewhere('loan:2', 'write'), false, 'the read stays held: another writer is refused');
        assert.equal(await freeElsewhere('loan:2', 'read'), true, 'held as a read only: another reader shares it');
        if (listsHolders)
          assert.deepEqual(
            (await locks.inspect('loan:2')).holders.map((h) => h.mode),
            ['read'],
          );
        assert.equal((await db.logRows('other')).length, 0, 'the other key of the refused request was never taken');
      },
      { mode: 'read' },
    );
    // This chain's read, and the other process's read that shared it.
    assert.deepEqual(
      (await db.logRows('loan:2')).map((r) => [r.mode, r.status]),
      [
        ['read', 'RELEASED'],
        ['read', 'RELEASED'],
      ],
    );
  });

  it('read -> read and write -> write are free; a nested request for new keys takes only those', async () => {
    await locks.withLock(
      'loan:3',
      async (outer) => {
        const before = trips();
        const nested = await locks.acquire('loan:3', { mode: 'read' });
        assert.equal(nested.reentrant, true);
        assert.equal(nested.fencingToken, outer.fencingToken);
        await nested.release();
        assert.equal(trips() - before, 0);
        assert.equal(outer.released, false, 'releasing the nested handle leaves the outer hold');
      },
      { mode: 'read' },
    );
    // claim:9 was locked before, so its key row exists: its grant is one round trip (a first use adds one to create it).
    await (await locks.acquire('claim:9')).release();
    await locks.withLock('loan:4', async () => {
      const before = trips();
      await locks.withLock('loan:4', async (inner) => assert.equal(inner.reentrant, true));
      assert.equal(trips() - before, 0);
      // Nested [loan:4 read, claim:9 write]: loan:4 comes from the outer write, only claim:9 is granted.
      const mixed = await locks.acquire([
        { key: 'loan:4', mode: 'read' },
        { key: 'claim:9', mode: 'write' },
      ]);
      assert.equal(mixed.reentrant, false);
      // Row-lock: the new key is taken in the outer transaction, on its connection, which the
      // library pool's round-trip counter does not see.
      if (countsTrips) assert.equal(trips() - before, 1, 'one grant for the one new key');
      assert.deepEqual(mixed.modes, { 'claim:9': 'write', 'loan:4': 'read' });
      assert.equal(await freeElsewhere('claim:9', 'read'), false, 'the new key is held');
      await mixed.release();
      assert.equal(await freeElsewhere('loan:4', 'read'), false, 'the outer write is still held');
      assert.equal(await freeElsewhere('claim:9', 'write'), true, 'releasing the nested handle freed the new key');
      if (listsHolders) {
        assert.deepEqual((await locks.inspect('claim:9')).holders, []);
        assert.deepEqual(
          (await locks.inspect('loan:4')).holders.map((h) => h.mode),
          ['write'],
          'the outer write is still held',
        );
      }
    });
  });

  it('a separate call chain gets no reentrancy: it waits like any other process', async () => {
    const outer = await locks.acquire('loan:5', { mode: 'read' });
    // acquire() outside withLock puts nothing in the call chain: a write from here must wait.
    assert.equal(await locks.tryAcquire('loan:5', { mode: 'write' }), null);
    await outer.release();
  });
});
