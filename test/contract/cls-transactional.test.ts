import 'reflect-metadata';
import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { Inject, Injectable } from '@nestjs/common';
import { getDataSourceToken, InjectRepository, TypeOrmModule } from '@nestjs/typeorm';
import { ClsPluginTransactional, Transactional, TransactionHost } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { ClsModule } from 'nestjs-cls';
import type { EntityManager, Repository } from 'typeorm';
import { DbLockModule, type DbLockModuleOptions, EscapedWriteError, LockLostError, LockService, WriteLock } from '../../lib/index.js';
import { Account, balanceOf, CapturingLogger, createAccounts } from '../support/accounts.js';
import { bootLockApp } from '../support/boot-app.js';
import { eventually } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';
import { appliesTo, contractSuite } from '../support/contract-targets.js';

/**
 * With @nestjs-cls/transactional and its TypeORM adapter installed, a fenced call's transaction IS
 * that library's current transaction: txHost.tx, repositories from it and nested @Transactional()
 * calls write inside the fence, commit only with it and roll back with it (errors, takeovers).
 */
type TxHost = TransactionHost<TransactionalAdapterTypeOrm>;
class BusinessError extends Error {}
/** The test database, for reads from outside the fenced transaction. */
let db: TestDatabase;

@Injectable()
class AccountWriter {
  // Explicit token: a generic type alias leaves no usable design:paramtypes entry.
  constructor(@Inject(TransactionHost) readonly txHost: TxHost) {}

  /** A plain @Transactional() service method (default propagation REQUIRED), as apps already have them. */
  @Transactional()
  async setBalance(id: number, balance: number): Promise<void> {
    await this.txHost.tx.getRepository(Account).update({ id }, { balance });
  }
}

@Injectable()
class Ledger {
  /** The committed balance seen from outside while the locked method ran (after its write). */
  seenOutside: number | undefined;
  constructor(
    @Inject(TransactionHost) readonly txHost: TxHost,
    readonly locks: LockService,
    readonly writer: AccountWriter,
    @InjectRepository(Account) readonly repo: Repository<Account>,
  ) {}

  @WriteLock('acct:{0}')
  async viaTxHost(id: number, balance: number, fail = false): Promise<{ same: boolean; active: boolean }> {
    await this.txHost.tx.getRepository(Account).update({ id }, { balance });
    this.seenOutside = await balanceOf(db, id);
    if (fail) throw new BusinessError('after the write');
    return { same: this.txHost.tx === this.locks.manager, active: this.txHost.isTransactionActive() };
  }

  @WriteLock('acct:{0}')
  async viaNestedTransactional(id: number, balance: number, fail = false): Promise<void> {
    await this.writer.setBalance(id, balance);
    this.seenOutside = await balanceOf(db, id);
    if (fail) throw new BusinessError('after the nested call');
  }

  /** Writes through txHost.tx and a nested @Transactional() method, then another holder takes the key over before the fence. */
  @WriteLock('acct:{0}')
  async takenOver(id: number, other: number, balance: number): Promise<void> {
    await this.txHost.tx.getRepository(Account).update({ id }, { balance });
    await this.writer.setBalance(other, balance);
    const [owner] = (await db.logRows(`acct:${id}`)).map((r) => String(r.owner));
    // What a takeover writes: the holder's rows are no longer live, so the fence must refuse to commit.
    await db.query(`UPDATE db_lock_log SET status = 'EXPIRED' WHERE owner = ?`, [owner]);
  }

  /** The reported mistake with the integration installed: an @InjectRepository repository still writes outside. */
  @WriteLock('acct:{0}')
  async fencedThenInjected(id: number): Promise<void> {
    await this.txHost.tx.getRepository(Account).update({ id }, { balance: 1 });
    await this.repo.update({ id }, { balance: 500 });
  }

  @WriteLock('acct:{0}')
  async managerInside(id: number): Promise<unknown> {
    void id;
    return this.txHost.tx;
  }

  /** A fenced call inside the caller's own @Transactional(): a new transaction for the call, the caller's again after it. */
  @Transactional()
  async outerTransaction(id: number): Promise<{ before: unknown; inside: unknown; after: unknown }> {
    const before = this.txHost.tx;
    const inside = await this.managerInside(id);
    return { before, inside, after: this.txHost.tx };
  }
}

contractSuite('fenced-decorators', '@nestjs-cls/transactional: the fenced transaction is the current transaction', { postgres: true }, (target) => {
  before(async () => {
    db = await TestDatabase.forTarget(target);
    await createAccounts(db, [1, 2, 3, 4, 5, 6, 7, 8, 9]);
  });
  after(async () => {
    await db?.drop();
  });

  async function boot(lockModule = DbLockModule.forRoot(target.options())) {
    const logger = new CapturingLogger();
    const cls = ClsModule.forRoot({
      global: true,
      plugins: [new ClsPluginTransactional({ adapter: new TransactionalAdapterTypeOrm({ dataSourceToken: getDataSourceToken() }) })],
    });
    const { app, locks } = await bootLockApp(db.settings, lockModule, {
      imports: [cls, TypeOrmModule.forFeature([Account])],
      providers: [Ledger, AccountWriter],
      logger,
    });
    return { app, locks, ledger: app.get(Ledger), txHost: app.get<TxHost>(TransactionHost), logger };
  }

  it('txHost.tx inside a fenced call is the fenced EntityManager: its writes commit with the fence, roll back on error', async () => {
    const { app, ledger } = await boot();
    try {
      assert.deepEqual(await ledger.viaTxHost(1, 300), { same: true, active: true });
      assert.equal(ledger.seenOutside, 100, 'not committed before the fence');
      assert.equal(await balanceOf(db, 1), 300, 'committed with it');
      await assert.rejects(ledger.viaTxHost(2, 300, true), BusinessError);
      assert.equal(await balanceOf(db, 2), 100, 'rolled back with the fenced call');
      // A row-lock hold that rolled back gets its audit row just after the rollback (batched): polled for.
      let statuses: unknown[] = [];
      await eventually(
        async () => (statuses = (await db.logRows('acct:2')).map((r) => r.status)).length > 0,
        5_000,
        'the log row of the rolled-back call',
      );
      assert.deepEqual(statuses, ['FAILED']);
    } finally {
      await app.close();
    }
  });

  it('a nested @Transactional() method joins the fenced transaction (default propagation)', async () => {
    const { app, ledger, logger } = await boot();
    try {
      await ledger.viaNestedTransactional(3, 400);
      assert.equal(ledger.seenOutside, 100);
      assert.equal(await balanceOf(db, 3), 400);
      await assert.rejects(ledger.viaNestedTransactional(4, 400, true), BusinessError);
      assert.equal(await balanceOf(db, 4), 100);
      assert.deepEqual(logger.escaped(), [], 'nothing escaped the fence');
    } finally {
      await app.close();
    }
  });

  // Only a lease holder can be taken over under its running work (a row-lock holder keeps its key until its commit).
  if (appliesTo('lease-takeover', target))
    it('a takeover before the fence rolls back the txHost write and the nested @Transactional() one with LockLostError', async () => {
      const { app, ledger } = await boot();
      try {
        await assert.rejects(ledger.takenOver(5, 9, 999), LockLostError);
        assert.equal(await balanceOf(db, 5), 100);
        assert.equal(await balanceOf(db, 9), 100);
      } finally {
        await app.close();
      }
    });

  it("the caller's own transaction is untouched: outside fenced calls txHost works as before", async () => {
    const { app, ledger, txHost, locks } = await boot();
    try {
      const { before, inside, after } = await ledger.outerTransaction(6);
      assert.notEqual(inside, before, 'the fenced call ran in its own transaction');
      assert.equal(after, before, "the caller's transaction is current again after it");
      assert.equal(txHost.isTransactionActive(), false);
      await txHost.withTransaction(async () => {
        await txHost.tx.getRepository(Account).update({ id: 6 }, { balance: 50 });
      });
      assert.equal(await balanceOf(db, 6), 50);
      assert.throws(() => locks.manager, 'no fenced transaction outside locked calls');
    } finally {
      await app.close();
    }
  });

  it('an @InjectRepository write still escapes: the self-deadlock fails fast, and the fix names TransactionHost.tx', async () => {
    const { app, ledger } = await boot();
    try {
      const started = performance.now();
      await assert.rejects(ledger.fencedThenInjected(7), (error: unknown) => {
        assert.ok(error instanceof EscapedWriteError, String(error));
        assert.equal(error.reason, 'lock-wait');
        assert.match(error.fix, /TransactionHost\.tx/);
        return true;
      });
      assert.ok(performance.now() - started < 5_000);
      assert.equal(await balanceOf(db, 7), 100);
    } finally {
      await app.close();
    }
  });

  it('transactionHost: false turns the binding off; an explicit TransactionHost from forRootAsync turns it on', async () => {
    const off = await boot(DbLockModule.forRoot(target.options({ transactionHost: false })));
    try {
      const tx = (await off.ledger.managerInside(8)) as EntityManager;
      assert.equal(tx.queryRunner, undefined, "txHost.tx is the adapter's fallback, not the fence");
    } finally {
      await off.app.close();
    }
    const explicit = await boot(
      DbLockModule.forRootAsync({
        inject: [TransactionHost],
        useFactory: (txHost: TxHost): DbLockModuleOptions => target.options({ transactionHost: txHost }),
      }),
    );
    try {
      assert.deepEqual(await explicit.ledger.viaTxHost(8, 800), { same: true, active: true });
      assert.equal(await balanceOf(db, 8), 800);
    } finally {
      await explicit.app.close();
    }
  });
});
