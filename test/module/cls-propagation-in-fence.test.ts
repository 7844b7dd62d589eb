import 'reflect-metadata';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Inject, Injectable } from '@nestjs/common';
import { getDataSourceToken, TypeOrmModule } from '@nestjs/typeorm';
import { ClsPluginTransactional, Propagation, Transactional, TransactionHost } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { ClsModule } from 'nestjs-cls';
import { DbLockModule, type DbLockModuleOptions, EscapedWriteError, LockService, type LockStrategyName, WriteLock } from '../../lib/index.js';
import { Account, balanceOf, CapturingLogger, createAccounts } from '../support/accounts.js';
import { bootLockApp } from '../support/boot-app.js';
import { TestDatabase } from '../support/test-database.js';

/**
 * @nestjs-cls/transactional propagations inside a fenced call. REQUIRES_NEW is
 * documented as outside the fence and reported by the escaped-write check ('error' refuses it);
 * NESTED is a savepoint inside the fenced transaction: a failed nested block rolls back alone.
 */
type TxHost = TransactionHost<TransactionalAdapterTypeOrm>;
let db: TestDatabase;

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

before(async () => {
  db = await TestDatabase.create();
  await createAccounts(
    db,
    Array.from({ length: 20 }, (_, i) => i + 1),
  );
});
after(async () => {
  await db?.drop();
});

async function boot(options: DbLockModuleOptions) {
  const cls = ClsModule.forRoot({
    global: true,
    plugins: [new ClsPluginTransactional({ adapter: new TransactionalAdapterTypeOrm({ dataSourceToken: getDataSourceToken() }) })],
  });
  const { app } = await bootLockApp(db.settings, DbLockModule.forRoot(options), {
    imports: [cls, TypeOrmModule.forFeature([Account])],
    providers: [Service, Writer],
    logger: new CapturingLogger(),
  });
  return { app, service: app.get(Service) };
}

for (const strategy of ['lease', 'row-lock'] as LockStrategyName[]) {
  describe(`@nestjs-cls/transactional propagations in a fenced call (${strategy})`, () => {
    const base = strategy === 'lease' ? 0 : 10;

    it("'error': @Transactional(RequiresNew) inside a fenced call is refused, nothing commits", async () => {
      const { app, service } = await boot({ strategy, escapedWrites: 'error' });
      try {
        await assert.rejects(service.withRequiresNew(base + 1, base + 2), (e: unknown) => e instanceof EscapedWriteError && e.reason === 'escaped');
        assert.equal(await balanceOf(db, base + 1), 100);
        assert.equal(await balanceOf(db, base + 2), 100);
      } finally {
        await app.close();
      }
    });

    it('@Transactional(Nested): a failed nested block rolls back alone; the rest commits with the fence, or rolls back with it', async () => {
      const { app, service } = await boot({ strategy });
      try {
        await service.withNested(base + 3, base + 4, true, false);
        assert.equal(await balanceOf(db, base + 3), 11);
        assert.equal(await balanceOf(db, base + 4), 100, 'the failed nested block rolled back to its savepoint');
        await service.withNested(base + 5, base + 6, false, false);
        assert.equal(await balanceOf(db, base + 6), 22);
        await assert.rejects(service.withNested(base + 7, base + 8, false, true), /outer fails/);
        assert.equal(await balanceOf(db, base + 7), 100);
        assert.equal(await balanceOf(db, base + 8), 100, 'the nested block rolled back with the fence');
      } finally {
        await app.close();
      }
    });
  });
}
