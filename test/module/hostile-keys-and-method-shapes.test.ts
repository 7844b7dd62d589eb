import 'reflect-metadata';
import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import { Observable, of } from 'rxjs';
import {
  DbLockError,
  DbLockOptionsError,
  DistributedLock,
  InvalidLockKeyError,
  LockService,
  ReadLock,
  Semaphore,
  WriteLock,
} from '../../lib/index.js';
import { createLockApp } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';

/**
 * Decorated methods of every shape, and key templates/functions given hostile
 * values. Bad keys reject with a typed error (never a synchronous throw, never a driver error)
 * and write nothing: the lock tables hold as many rows before as after.
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

it('method shapes: static, this rebound, inherited, sync value, sync throw', async () => {
  class Base {
    constructor(readonly tag: string) {}
    @WriteLock((_x: number) => `base`)
    async who(): Promise<string> {
      return `${this.tag}:${locks.currentLock!.keys[0]}`;
    }
    @WriteLock('static')
    static async stat(): Promise<string> {
      return `${this.name}:${locks.currentLock!.keys[0]}`;
    }
    @DistributedLock({
      key: function (this: Base) {
        return `self:${this.tag}`;
      },
    })
    async self(): Promise<string> {
      return locks.currentLock!.keys[0]!;
    }
    @WriteLock('sync')
    syncValue(): Promise<number> {
      return 42 as unknown as Promise<number>;
    }
  }
  class Sub extends Base {}
  assert.equal(await new Sub('s').who(), 's:base');
  assert.equal(await Base.stat(), 'Base:static');
  assert.equal(await Sub.stat(), 'Sub:static');
  const other = { tag: 'other' };
  assert.equal(await Base.prototype.self.call(other as Base), 'self:other');
  assert.equal(await new Base('b').syncValue(), 42);
});

it('declarations refused when the class loads: getter, Observable return type, two lock decorators', () => {
  assert.throws(() => {
    class G {
      // @ts-expect-error a getter is a type error too
      @WriteLock('g')
      get value(): Promise<number> {
        return Promise.resolve(1);
      }
    }
    void G;
  }, DbLockError);
  assert.throws(() => {
    class O {
      // @ts-expect-error a non-Promise method is a type error too
      @WriteLock('o')
      stream(): Observable<number> {
        return of(1);
      }
    }
    void O;
  }, DbLockError);
  assert.throws(() => {
    class T {
      @WriteLock('a')
      @ReadLock('b')
      async m(): Promise<void> {}
    }
    void T;
  }, DbLockError);
  assert.throws(() => {
    class U {
      @WriteLock('a:{3}')
      async m(_a: number): Promise<void> {}
    }
    void U;
  }, DbLockOptionsError);
});

it("synchronous methods under @Semaphore and transaction: 'none': values answered as promises, a synchronous throw frees the key", async () => {
  class Sync {
    @Semaphore('sync-sem:{0}', 1)
    semThrow(_k: string): Promise<void> {
      throw new RangeError('sync throw in a permit');
    }
    @Semaphore('sync-sem:{0}', 1)
    semValue(_k: string): Promise<string> {
      return 'v' as unknown as Promise<string>;
    }
    @WriteLock('sync-none:{0}', { transaction: 'none' })
    noneThrow(_k: string): Promise<void> {
      throw new RangeError('sync throw without a transaction');
    }
    @WriteLock('sync-none:{0}', { transaction: 'none', onLocked: 'skip' })
    noneValue(_k: string): Promise<string | undefined> {
      return 'w' as unknown as Promise<string>;
    }
  }
  const s = new Sync();
  const thrown = s.semThrow('a');
  assert.ok(thrown instanceof Promise);
  await assert.rejects(thrown, RangeError);
  assert.equal(await s.semValue('a'), 'v', 'the permit is free again');
  const thrown2 = s.noneThrow('b');
  assert.ok(thrown2 instanceof Promise);
  await assert.rejects(thrown2, RangeError);
  assert.equal(await s.noneValue('b'), 'w', 'the key is free again');
  const [live] = await db.query<{ n: number }[]>(`SELECT COUNT(*) AS n FROM db_lock_log WHERE status IN ('ACQUIRED', 'COMPLETED')`);
  assert.equal(Number(live!.n), 0, 'no live rows left');
});
