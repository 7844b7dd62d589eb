import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import { TestDatabase } from '../support/test-database.js';
import { createLockApp } from '../support/lock-app.js';
import type { LockHandle, LockService } from '../../lib/index.js';

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
];

describe('keys compare exactly', () => {
  let db: TestDatabase;
  let appA: INestApplicationContext;
  let appB: INestApplicationContext;
  let a: LockService;
  let b: LockService;
  before(async () => {
    db = await TestDatabase.create();
    ({ app: appA, locks: a } = await createLockApp(db.settings));
    ({ app: appB, locks: b } = await createLockApp(db.settings));
  });
  after(async () => {
    await appA?.close();
    await appB?.close();
    await db?.drop();
  });

  for (const group of LOOK_ALIKES) {
    it(`${group.map((k) => JSON.stringify(k)).join(', ')} are independent locks, held at once`, async () => {
      const held: LockHandle[] = [];
      for (const key of group) {
        const lock = await a.acquire(key, { timeoutMs: 0 });
        assert.equal(lock.fencingToken, 1, `${JSON.stringify(key)} was merged with another key`);
        held.push(lock);
      }
      // Each is held, by its own owner, and another process can take none of them.
      const owners = new Set<string>();
      for (const key of group) {
        const info = await b.inspect(key);
        assert.equal(info.holders.length, 1, JSON.stringify(key));
        owners.add(info.holders[0]!.owner);
        assert.equal(await b.tryAcquire(key), null, `${JSON.stringify(key)} could be taken while held`);
      }
      assert.equal(owners.size, group.length);
      // One row per key, stored byte for byte.
      const rows = await db.query<{ lock_key: Buffer }[]>('SELECT lock_key FROM db_lock WHERE lock_key IN (?)', [group.map((k) => Buffer.from(k))]);
      assert.deepEqual(rows.map((r) => r.lock_key.toString('utf8')).sort(), [...group].sort());
      for (const lock of held) await lock.release();
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
