import 'reflect-metadata';
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Inject, Injectable, Module } from '@nestjs/common';
import type { INestApplicationContext } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { getDataSourceToken, TypeOrmModule } from '@nestjs/typeorm';
import { ClsPluginTransactional, TransactionHost } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { ClsModule } from 'nestjs-cls';
import { DataSource } from 'typeorm';
import { DbLockModule, EscapedWriteError, LockService, WriteLock } from '../../lib/index.js';
import { Account, CapturingLogger } from '../support/accounts.js';
import { PgTestDatabase, pgTestsRun } from '../support/pg-test-database.js';

type TxHost = TransactionHost<TransactionalAdapterTypeOrm>;
class BusinessError extends Error {}

@Injectable()
class Ledger {
  constructor(
    @Inject(TransactionHost) readonly txHost: TxHost,
    readonly locks: LockService,
    readonly dataSource: DataSource,
  ) {}

  /** Writes through txHost.tx: the fenced transaction's EntityManager. */
  @WriteLock('acct:{0}')
  async viaTxHost(id: number, balance: number, fail = false): Promise<boolean> {
    await this.txHost.tx.getRepository(Account).update({ id }, { balance });
    if (fail) throw new BusinessError('after the write');
    return this.txHost.tx === this.locks.manager;
  }

  /** The self-deadlock: the fenced transaction writes a row, then the DataSource (another connection) writes it too. */
  @WriteLock('acct:{0}')
  async escapes(id: number): Promise<void> {
    await this.locks.manager.query(`UPDATE account SET balance = 1 WHERE id = ${id}`);
    await this.dataSource.query(`UPDATE account SET balance = 500 WHERE id = ${id}`);
  }
}

/**
 * What sits around fenced calls, on PostgreSQL: @nestjs-cls/transactional's current transaction is
 * the fenced one, and the escaped-write guard (default 'warn') cuts a write outside the fence that
 * waits for the fence's own row lock after about a second (PostgreSQL would wait for ever).
 */
describe('fenced-call integrations on PostgreSQL', { skip: (await pgTestsRun()) ? false : 'no PostgreSQL server' }, () => {
  let db: PgTestDatabase;
  let app: INestApplicationContext;
  let ledger: Ledger;
  const logger = new CapturingLogger();

  before(async () => {
    db = await PgTestDatabase.create('dblock_pg_integrations');
    const dataSource = await db.dataSource();
    await dataSource.runMigrations();
    await dataSource.query('CREATE TABLE account (id int PRIMARY KEY, balance int NOT NULL)');
    await dataSource.query('INSERT INTO account VALUES (1, 100), (2, 100), (3, 100)');
    @Module({
      imports: [
        TypeOrmModule.forRoot({ ...db.options(), autoLoadEntities: true }),
        TypeOrmModule.forFeature([Account]),
        ClsModule.forRoot({
          global: true,
          plugins: [new ClsPluginTransactional({ adapter: new TransactionalAdapterTypeOrm({ dataSourceToken: getDataSourceToken() }) })],
        }),
        DbLockModule.forRoot(),
      ],
      providers: [Ledger],
    })
    class PgApp {}
    app = await NestFactory.createApplicationContext(PgApp, { logger });
    ledger = app.get(Ledger);
  });
  after(async () => {
    await app?.close();
    await db.drop();
  });

  const balance = async (id: number) => Number((await db.query<{ balance: number }>('SELECT balance FROM account WHERE id = $1', [id]))[0]!.balance);

  it('txHost.tx inside a fenced call is the fenced EntityManager: its write commits with the fence, rolls back on error', async () => {
    assert.equal(await ledger.viaTxHost(1, 150), true);
    assert.equal(await balance(1), 150);
    await assert.rejects(ledger.viaTxHost(1, 999, true), BusinessError);
    assert.equal(await balance(1), 150);
  });

  it("an escaped write waiting for the fence's own row lock fails in about a second with EscapedWriteError", async () => {
    const started = performance.now();
    const failure = await ledger.escapes(2).catch((error: unknown) => error);
    const took = performance.now() - started;
    assert.ok(failure instanceof EscapedWriteError, String(failure));
    // The bound is 1 s; margin for a loaded 2-core host. Without it PostgreSQL waits for ever (lock_timeout 0).
    assert.ok(took >= 900 && took < 5_000, `failed after ${took.toFixed(0)} ms`);
    assert.equal(await balance(2), 100, 'neither write committed');
    assert.equal(logger.escaped().length, 1, 'one warning for the call site');
    // The connection that sent the escaped write has its own lock_timeout back (0), whichever the pool gives next.
    const settings = await Promise.all(Array.from({ length: 10 }, () => app.get(DataSource).query("SELECT current_setting('lock_timeout') AS t")));
    assert.deepEqual([...new Set(settings.map((rows: { t: string }[]) => rows[0]!.t))], ['0']);
  });
});
