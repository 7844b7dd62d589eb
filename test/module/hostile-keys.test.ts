import 'reflect-metadata';
import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import { DistributedLock, InvalidLockKeyError, LockService, ReadLock, Semaphore, WriteLock } from '../../lib/index.js';
import { createLockApp } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';

/**
 * Key templates and key functions given hostile values. Bad keys reject with a typed error (never
 * a synchronous throw, never a driver error) and write nothing: the lock tables hold as many rows
 * before as after. Methods of every shape: decorated-method-shapes.test.ts.
 */
let db: TestDatabase;
let app: INestApplicationContext;
let locks: LockService;

before(async () => {
  db = await TestDatabase.create();
  await db.query('CREATE TABLE entry (id INT AUTO_INCREMENT PRIMARY KEY, k VARBINARY(1000) NOT NULL) ENGINE=InnoDB');
  ({ app, locks } = await createLockApp(db.settings, {}));
});
after(async () => {
  await app?.close();
  await db?.drop();
});

async function rowCounts(): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  for (const table of ['db_lock', 'db_lock_log', 'db_lock_row_lock', 'entry']) {
    const [row] = await db.query<{ n: number }[]>(`SELECT COUNT(*) AS n FROM ${table}`);
    counts[table] = Number(row!.n);
  }
  return counts;
}

class Keys {
  @WriteLock('t:{0}')
  async template(_v: unknown): Promise<string> {
    return locks.currentLock!.keys[0]!;
  }

  @WriteLock('p:{0.id}')
  async path(_v: unknown): Promise<string> {
    return locks.currentLock!.keys[0]!;
  }

  @DistributedLock({ key: (v: unknown) => v as string })
  async fn(_v: unknown): Promise<string> {
    await locks.manager.query('INSERT INTO entry (k) VALUES (?)', [Buffer.from(locks.currentLock!.keys[0]!)]);
    return locks.currentLock!.keys[0]!;
  }

  @ReadLock((v: unknown) => v as string, { strategy: 'row-lock' })
  async rowFn(_v: unknown): Promise<string> {
    return locks.currentLock!.keys[0]!;
  }

  @Semaphore((v: unknown) => v as string, 2)
  async sem(_v: unknown): Promise<string> {
    return locks.currentLock!.keys[0]!;
  }

  @WriteLock(() => {
    throw new TypeError('key function failed');
  })
  async throwingKey(): Promise<void> {}
}
const keys = new Keys();

const HOSTILE: [string, unknown][] = [
  ['undefined', undefined],
  ['null', null],
  ['NaN', Number.NaN],
  ['Infinity', Number.POSITIVE_INFINITY],
  ['an object', { id: 1 }],
  ['a symbol', Symbol('s')],
  ['an empty string', ''],
  ['a function', () => 'x'],
  ['a boolean', true],
  ['a 300-character string', 'x'.repeat(300)],
  ['a lone surrogate', 'a\uD800b'],
];

for (const [label, value] of HOSTILE) {
  it(`template key given ${label}: a typed rejection, nothing written`, async () => {
    const before = await rowCounts();
    const answer = keys.template(value);
    assert.ok(answer instanceof Promise, 'answered with a promise, not a synchronous throw');
    await assert.rejects(answer, (e: unknown) => e instanceof InvalidLockKeyError, `template with ${label}`);
    assert.deepEqual(await rowCounts(), before);
  });
  if (label !== 'an object')
    it(`key function returning ${label}: a typed rejection, nothing written (lease, row-lock, semaphore)`, async () => {
      const before = await rowCounts();
      await assert.rejects(keys.fn(value), (e: unknown) => e instanceof InvalidLockKeyError, `fn with ${label}`);
      await assert.rejects(keys.rowFn(value), (e: unknown) => e instanceof InvalidLockKeyError, `row-lock fn with ${label}`);
      await assert.rejects(keys.sem(value), (e: unknown) => e instanceof InvalidLockKeyError, `semaphore fn with ${label}`);
      assert.deepEqual(await rowCounts(), before);
    });
}

it('a semaphore key function returning an array, or { key, mode }: a typed rejection, nothing written', async () => {
  const before = await rowCounts();
  await assert.rejects(keys.sem(['a', 'b']), (e: unknown) => e instanceof InvalidLockKeyError);
  await assert.rejects(keys.sem([{ key: 'a', mode: 'write' }]), (e: unknown) => e instanceof InvalidLockKeyError);
  assert.deepEqual(await rowCounts(), before);
});

it('numbers render canonically: -0 is 0, bigints as digits; paths through null are refused', async () => {
  assert.equal(await keys.template(-0), 't:0');
  assert.equal(await keys.template(0), 't:0');
  assert.equal(await keys.template(-12n), 't:-12');
  assert.equal(await keys.template(1e21), 't:1e+21');
  assert.equal(await keys.path({ id: 'x' }), 'p:x');
  await assert.rejects(keys.path(null), InvalidLockKeyError);
  await assert.rejects(keys.path({}), InvalidLockKeyError);
});

it('a key function that throws: the call rejects (no synchronous throw), nothing written', async () => {
  const before = await rowCounts();
  const answer = keys.throwingKey();
  assert.ok(answer instanceof Promise);
  await assert.rejects(answer, TypeError);
  assert.deepEqual(await rowCounts(), before);
});

it('keys with NUL bytes and 4-byte characters are distinct locks, stored exactly', async () => {
  const a = 'k\u0000a';
  const b = 'k\u0000b';
  const emoji = '😀'.repeat(180);
  assert.equal(await keys.fn(a), a);
  assert.equal(await keys.fn(b), b);
  assert.equal(await keys.fn(emoji), emoji);
  assert.equal(await keys.rowFn(a), a);
  const held = await locks.acquire(a);
  try {
    assert.equal(await locks.tryAcquire(b).then(async (h) => (h ? (await h.release(), 'free') : 'held')), 'free');
    assert.equal(await locks.tryAcquire('k').then(async (h) => (h ? (await h.release(), 'free') : 'held')), 'free');
  } finally {
    await held.release();
  }
  const stored = (await db.query<{ k: Buffer }[]>('SELECT k FROM entry ORDER BY id')).map((r) => r.k.toString('utf8'));
  assert.deepEqual(stored.slice(-3), [a, b, emoji]);
});
