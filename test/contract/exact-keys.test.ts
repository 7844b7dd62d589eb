import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import { TestDatabase } from '../support/test-database.js';
import { createLockApp } from '../support/lock-app.js';
import { type LockHandle, type LockService, MAX_KEY_LENGTH } from '../../lib/index.js';
import { contractSuite } from '../support/contract-targets.js';

/**
 * Keys compare exactly: no PAD SPACE, no case folding, no Unicode normalisation. Keys that a
 * collation would merge must be independent locks, all held at once.
 */
const LOOK_ALIKES: string[][] = [
  ['k', 'K', 'k '],
  ['e\u0301', '\u00e9'], // NFD vs NFC "é"
  ['ss', 'ß'],
  ['a', '\uff41'], // ASCII vs fullwidth
  ['t', 't\t', 't\u00a0'],
  ['n', 'n\u0000', 'n\u0000a', 'n\u0000b'], // NUL bytes are key bytes, not terminators
  ['A', '\\x41', '\\101', '\\', '\\\\'], // bytea's hex and escape input forms are key text, not bytes
  ["'", "''", "'; DELETE FROM db_lock; --", '"', '`', '$1', '?', '%', '_'], // quotes, placeholders and LIKE wildcards are key text
  ['\u{1D11E}'.repeat(MAX_KEY_LENGTH), '\u{1D11E}'.repeat(MAX_KEY_LENGTH - 1) + 'x'], // the longest keys: 764 bytes of UTF-8
];

contractSuite('exact-keys', 'keys compare exactly', { postgres: true }, (target) => {
  let db: TestDatabase;
  let appA: INestApplicationContext;
  let appB: INestApplicationContext;
  let a: LockService;
  let b: LockService;
  before(async () => {
    db = await TestDatabase.forTarget(target);
    ({ app: appA, locks: a } = await createLockApp(db.settings, target.options()));
    ({ app: appB, locks: b } = await createLockApp(db.settings, target.options()));
  });
  after(async () => {
    await appA?.close();
    await appB?.close();
    await db?.drop();
  });

  // A row-lock holder has no live row before its commit: inspect() and listLocks() show lease holders only.
  const listsHolders = !target.capabilities.has('holder-connection');

  for (const group of LOOK_ALIKES) {
    it(`${group.map((k) => JSON.stringify(k.length > 20 ? `${k.slice(0, 4)}…(${Buffer.byteLength(k)} bytes)` : k)).join(', ')} are independent locks, held at once`, async () => {
      const held: LockHandle[] = [];
      try {
        for (const key of group) {
          const lock = await a.acquire(key, { timeoutMs: 0 });
          assert.equal(lock.fencingToken, 1, `${JSON.stringify(key)} was merged with another key`);
          held.push(lock);
        }
        // Each is held, and another process can take none of them.
        for (const key of group) assert.equal(await b.tryAcquire(key), null, `${JSON.stringify(key)} could be taken while held`);
        if (listsHolders) {
          // Each by its own owner, listed back from the store byte for byte, one holder per key.
          const owners = new Set<string>();
          for (const key of group) {
            const info = await b.inspect(key);
            assert.equal(info.holders.length, 1, JSON.stringify(key));
            owners.add(info.holders[0]!.owner);
          }
          assert.equal(owners.size, group.length);
          const listed = (await b.listLocks()).locks.map((l) => l.key).filter((k) => group.includes(k));
          assert.deepEqual(listed.sort(), [...group].sort());
        }
      } finally {
        for (const lock of held) await lock.release();
      }
      // The log, read back byte for byte: one hold per key, each by its own owner.
      const owners = new Set<unknown>();
      for (const key of group) {
        const rows = await db.logRows(key);
        assert.deepEqual(
          rows.map((r) => [(r.lock_key as Buffer).toString('utf8'), Number(r.fencing_token), r.status]),
          [[key, 1, 'RELEASED']],
          JSON.stringify(key),
        );
        owners.add(rows[0]!.owner);
      }
      assert.equal(owners.size, group.length);
    });
  }

  it('a multi-key lock on look-alikes takes every one of them', async () => {
    const lock = await a.acquire(['m', 'M', 'm '], { timeoutMs: 0 });
    assert.equal(lock.keys.length, 3);
    assert.deepEqual(Object.values(lock.fencingTokens), [1, 1, 1]);
    for (const key of ['m', 'M', 'm ']) assert.equal(await b.tryAcquire(key), null);
    const other = await b.tryAcquire('m  ');
    assert.ok(other, "'m  ' is yet another key");
    await other.release();
    await lock.release();
  });

  it('releasing one look-alike frees only that one', async () => {
    const [lower, upper] = [await a.acquire('r', { timeoutMs: 0 }), await a.acquire('R', { timeoutMs: 0 })];
    await lower.release();
    const again = await b.tryAcquire('r');
    assert.ok(again, "'r' is free");
    assert.equal(await b.tryAcquire('R'), null, "'R' is still held");
    await again.release();
    await upper.release();
  });
});
