import 'reflect-metadata';
import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import { Observable, of } from 'rxjs';
import { DbLockError, DbLockOptionsError, DistributedLock, LockService, ReadLock, Semaphore, WriteLock } from '../../lib/index.js';
import { createLockApp } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';

/**
 * Decorated methods of every shape (static, rebound, inherited, not async) are locked and answered
 * with a promise; shapes the decorators cannot serve are refused when the class loads.
 */
let db: TestDatabase;
let app: INestApplicationContext;
let locks: LockService;

before(async () => {
  db = await TestDatabase.create();
  ({ app, locks } = await createLockApp(db.settings, {}));
});
after(async () => {
  await app?.close();
  await db?.drop();
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
