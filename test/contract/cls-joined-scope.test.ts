import 'reflect-metadata';
import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { Inject, Injectable } from '@nestjs/common';
import { getDataSourceToken, TypeOrmModule } from '@nestjs/typeorm';
import { ClsPluginTransactional, Propagation, Transactional, TransactionHost } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { ClsModule } from 'nestjs-cls';
import type { EntityManager } from 'typeorm';
import { DbLockModule, LockService, Semaphore, WriteLock } from '../../lib/index.js';
import { Account, balanceOf, CapturingLogger, createAccounts } from '../support/accounts.js';
import { bootLockApp } from '../support/boot-app.js';
import { endedStatuses } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';
import { contractSuite } from '../support/contract-targets.js';

/**
 * @nestjs-cls/transactional around and inside locked methods: propagation modes, nested locked
 * calls under a changed cls transaction, concurrent calls from one cls context, @Semaphore.
 */
type TxHost = TransactionHost<TransactionalAdapterTypeOrm>;
class BusinessError extends Error {}
let db: TestDatabase;

@Injectable()
class Inner {
  constructor(
    @Inject(TransactionHost) readonly txHost: TxHost,
    readonly locks: LockService,
  ) {}

  /** A locked method on its own key: inside it txHost.tx must be the fenced EntityManager. */
  @WriteLock('inner:{0}')
  async lockedWrite(id: number, balance: number): Promise<{ txIsFence: boolean }> {
    await this.txHost.tx.getRepository(Account).update({ id }, { balance });
    return { txIsFence: this.txHost.tx === this.locks.manager };
  }

  @Transactional(Propagation.Nested)
  async nestedSavepoint(id: number, balance: number, fail: boolean): Promise<void> {
    await this.txHost.tx.getRepository(Account).update({ id }, { balance });
    if (fail) throw new BusinessError('nested failed');
  }

  @Transactional(Propagation.RequiresNew)
  async requiresNewThenLocked(id: number, balance: number): Promise<{ txIsFence: boolean }> {
    return this.lockedWrite(id, balance);
  }
}

@Injectable()
class Outer {
  constructor(
    @Inject(TransactionHost) readonly txHost: TxHost,
    readonly locks: LockService,
    readonly inner: Inner,
  ) {}

  @WriteLock('outer:{0}')
  async savepoints(a: number, b: number): Promise<void> {
    await this.txHost.tx.getRepository(Account).update({ id: a }, { balance: 11 });
    await this.inner.nestedSavepoint(b, 22, false);
    await this.inner.nestedSavepoint(a, 33, true).catch((e: unknown) => {
      if (!(e instanceof BusinessError)) throw e;
    });
  }

  /** A locked call on another key from inside a @Transactional(RequiresNew) method inside this locked method. */
  @WriteLock('outer:{0}')
  async lockedInsideRequiresNew(id: number, other: number): Promise<{ txIsFence: boolean }> {
    await this.txHost.tx.getRepository(Account).update({ id }, { balance: 1 });
    return this.inner.requiresNewThenLocked(other, 44);
  }

  /** Same, from inside txHost.withoutTransaction (Propagation.NotSupported). */
  @WriteLock('outer:{0}')
  async lockedInsideWithout(id: number, other: number, failAfter: boolean): Promise<{ txIsFence: boolean }> {
    await this.txHost.tx.getRepository(Account).update({ id }, { balance: 1 });
    const result = await this.txHost.withoutTransaction(() => this.inner.lockedWrite(other, 55));
    if (failAfter) throw new BusinessError('outer failed after the nested locked call');
    return result;
  }

  @WriteLock('conc:{0}')
  async concurrent(id: number, balance: number): Promise<{ tx: unknown; fence: EntityManager }> {
    await new Promise((r) => setTimeout(r, 20));
    await this.txHost.tx.getRepository(Account).update({ id }, { balance });
    await new Promise((r) => setTimeout(r, 20));
    return { tx: this.txHost.tx, fence: this.locks.manager };
  }

  @Transactional()
  async manyFromOneTransaction(ids: number[]): Promise<{ tx: unknown; fence: EntityManager }[]> {
    return Promise.all(ids.map((id) => this.concurrent(id, 77)));
  }

  @Semaphore('sem:{0}', 2)
  async permitWrite(id: number, fail: boolean): Promise<boolean> {
    await this.txHost.tx.getRepository(Account).update({ id }, { balance: 88 });
    if (fail) throw new BusinessError('permit work failed');
    return this.txHost.tx === this.locks.manager;
  }
}

contractSuite('fenced-decorators', '@nestjs-cls/transactional around and inside locked methods', { postgres: true }, (target) => {
  before(async () => {
    db = await TestDatabase.forTarget(target);
    await createAccounts(
      db,
      Array.from({ length: 30 }, (_, i) => i + 1),
    );
  });
  after(async () => {
    await db?.drop();
  });

  async function boot() {
    const logger = new CapturingLogger();
    const cls = ClsModule.forRoot({
      global: true,
      plugins: [new ClsPluginTransactional({ adapter: new TransactionalAdapterTypeOrm({ dataSourceToken: getDataSourceToken() }) })],
    });
    const { app, locks } = await bootLockApp(db.settings, DbLockModule.forRoot(target.options({ janitor: false })), {
      imports: [cls, TypeOrmModule.forFeature([Account])],
      providers: [Outer, Inner],
      logger,
    });
    return { app, locks, outer: app.get(Outer), logger };
  }

  const ended = (key: string): Promise<unknown[]> => endedStatuses(db, key);

  it('@Transactional(Propagation.Nested) inside a locked method: a savepoint in the fence; the failed one rolled back, the rest committed', async () => {
    const { app, outer } = await boot();
    try {
      await outer.savepoints(1, 2);
      assert.equal(await balanceOf(db, 1), 11, 'the savepoint rolled back only its own write');
      assert.equal(await balanceOf(db, 2), 22);
      assert.deepEqual(await ended('outer:1'), ['RELEASED']);
    } finally {
      await app.close();
    }
  });

  it('a locked method called from a @Transactional(RequiresNew) method inside a locked method: txHost.tx is its fence', async () => {
    const { app, outer } = await boot();
    try {
      const result = await outer.lockedInsideRequiresNew(3, 4);
      assert.equal(result.txIsFence, true, 'inside the nested locked method, txHost.tx is lockService.manager');
    } finally {
      await app.close();
    }
  });

  it('a locked method called inside txHost.withoutTransaction in a locked method: its txHost.tx writes roll back with the fence', async () => {
    const { app, outer } = await boot();
    try {
      await assert.rejects(outer.lockedInsideWithout(5, 6, true), BusinessError);
      assert.equal(await balanceOf(db, 5), 100);
      assert.equal(await balanceOf(db, 6), 100, "the nested locked method's txHost.tx write rolled back with the fence it joined");
    } finally {
      await app.close();
    }
  });

  it('concurrent locked calls from one @Transactional() context: each sees its own fence as txHost.tx', async () => {
    const { app, outer, logger } = await boot();
    try {
      const results = await outer.manyFromOneTransaction([10, 11, 12, 13]);
      for (const r of results) assert.equal(r.tx, r.fence);
      assert.equal(new Set(results.map((r) => r.fence)).size, 4);
      for (const id of [10, 11, 12, 13]) assert.equal(await balanceOf(db, id), 77);
      assert.deepEqual(logger.escaped(), []);
    } finally {
      await app.close();
    }
  });

  if (target.strategy === 'lease')
    it('@Semaphore: txHost.tx is the fence; an error rolls back and ends the permit FAILED', async () => {
      const { app, outer } = await boot();
      try {
        assert.equal(await outer.permitWrite(20, false), true);
        assert.equal(await balanceOf(db, 20), 88);
        await assert.rejects(outer.permitWrite(21, true), BusinessError);
        assert.equal(await balanceOf(db, 21), 100);
        assert.deepEqual(await ended('sem:20'), ['RELEASED']);
        assert.deepEqual(await ended('sem:21'), ['FAILED']);
      } finally {
        await app.close();
      }
    });
});
