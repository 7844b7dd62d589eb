import 'reflect-metadata';
import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { Inject, Injectable } from '@nestjs/common';
import { getDataSourceToken, TypeOrmModule } from '@nestjs/typeorm';
import { ClsPluginTransactional, Propagation, Transactional, TransactionHost } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { ClsModule } from 'nestjs-cls';
import { DbLockModule, type DbLockModuleOptions, EscapedWriteError, LockService, WriteLock } from '../../lib/index.js';
import { Account, balanceOf, CapturingLogger, createAccounts } from '../support/accounts.js';
import { bootLockApp } from '../support/boot-app.js';
import { TestDatabase } from '../support/test-database.js';
import { contractSuite } from '../support/contract-targets.js';

/**
 * @nestjs-cls/transactional propagations inside a fenced call. REQUIRES_NEW is
 * documented as outside the fence and reported by the escaped-write check ('error' refuses it);
 * NESTED is a savepoint inside the fenced transaction: a failed nested block rolls back alone.
 */
type TxHost = TransactionHost<TransactionalAdapterTypeOrm>;

@Injectable()
class Writer {
  constructor(@Inject(TransactionHost) readonly txHost: TxHost) {}

  @Transactional(Propagation.RequiresNew)
  async requiresNew(id: number, balance: number): Promise<void> {
    await this.txHost.tx.getRepository(Account).update({ id }, { balance });
  }

  @Transactional(Propagation.Nested)
  async nested(id: number, balance: number, fail: boolean): Promise<void> {
    await this.txHost.tx.getRepository(Account).update({ id }, { balance });
    if (fail) throw new Error('nested fails');
  }
}

@Injectable()
class Service {
  constructor(
    @Inject(TransactionHost) readonly txHost: TxHost,
    readonly locks: LockService,
    readonly writer: Writer,
  ) {}

  @WriteLock('acct:{0}')
  async withRequiresNew(id: number, other: number): Promise<void> {
    await this.txHost.tx.getRepository(Account).update({ id }, { balance: 1 });
    await this.writer.requiresNew(other, 2);
  }

  @WriteLock('acct:{0}')
  async withNested(id: number, other: number, nestedFails: boolean, outerFails: boolean): Promise<void> {
    await this.txHost.tx.getRepository(Account).update({ id }, { balance: 11 });
    await this.writer.nested(other, 22, nestedFails).catch(() => undefined);
    if (outerFails) throw new Error('outer fails');
  }
}

contractSuite('fenced-decorators', '@nestjs-cls/transactional propagations in a fenced call', { postgres: true }, (target) => {
  let db: TestDatabase;
  before(async () => {
    db = await TestDatabase.forTarget(target);
    await createAccounts(db, [1, 2, 3, 4, 5, 6, 7, 8]);
  });
  after(async () => {
    await db?.drop();
  });

  async function boot(options: DbLockModuleOptions) {
    const cls = ClsModule.forRoot({
      global: true,
      plugins: [new ClsPluginTransactional({ adapter: new TransactionalAdapterTypeOrm({ dataSourceToken: getDataSourceToken() }) })],
    });
    const { app } = await bootLockApp(db.settings, DbLockModule.forRoot(target.options(options)), {
      imports: [cls, TypeOrmModule.forFeature([Account])],
      providers: [Service, Writer],
      logger: new CapturingLogger(),
    });
    return { app, service: app.get(Service) };
  }

  it("'error': @Transactional(RequiresNew) inside a fenced call is refused, nothing commits", { timeout: 30_000 }, async () => {
    const { app, service } = await boot({ escapedWrites: 'error' });
    try {
      await assert.rejects(service.withRequiresNew(1, 2), (e: unknown) => e instanceof EscapedWriteError && e.reason === 'escaped');
      assert.equal(await balanceOf(db, 1), 100);
      assert.equal(await balanceOf(db, 2), 100);
    } finally {
      await app.close();
    }
  });

  it(
    '@Transactional(Nested): a failed nested block rolls back alone; the rest commits with the fence, or rolls back with it',
    { timeout: 30_000 },
    async () => {
      const { app, service } = await boot({});
      try {
        await service.withNested(3, 4, true, false);
        assert.equal(await balanceOf(db, 3), 11);
        assert.equal(await balanceOf(db, 4), 100, 'the failed nested block rolled back to its savepoint');
        await service.withNested(5, 6, false, false);
        assert.equal(await balanceOf(db, 6), 22);
        await assert.rejects(service.withNested(7, 8, false, true), /outer fails/);
        assert.equal(await balanceOf(db, 7), 100);
        assert.equal(await balanceOf(db, 8), 100, 'the nested block rolled back with the fence');
      } finally {
        await app.close();
      }
    },
  );
});
