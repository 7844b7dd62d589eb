/**
 * Every code block of docs/guide/modules-and-transactions.md, compiled with the tests so none of them can rot:
 * test/unit/module-usage-doc.test.ts checks that each `<!-- snippet: name -->` block of the page
 * is the `#region name` below, word for word (imports of '../../lib/index.js' read as 'nestjs-db-lock').
 * Code outside the regions only stands in for the reader's own app.
 */
import 'reflect-metadata';
import { Injectable, Module } from '@nestjs/common';
import { ConfigModule, ConfigService } from '@nestjs/config';
import { getDataSourceToken, InjectRepository, TypeOrmModule } from '@nestjs/typeorm';
import { ClsPluginTransactional, Transactional, TransactionHost } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { ClsModule } from 'nestjs-cls';
import type { Repository } from 'typeorm';
import {
  DB_LOCK_MIGRATIONS,
  DbLockModule,
  type DbLockModuleOptions,
  type DbLockOptionsFactory,
  InjectLockService,
  LockService,
  WriteLock,
} from '../../lib/index.js';
import { Account } from '../support/accounts.js';

export const syncRegistration = () => {
  // #region register-sync
  @Module({
    imports: [
      TypeOrmModule.forRoot({ type: 'mysql', url: process.env.DATABASE_URL, autoLoadEntities: true, migrations: DB_LOCK_MIGRATIONS, migrationsRun: true }),
      DbLockModule.forRoot({ namespace: 'billing', leaseMs: 30_000 }),
    ],
  })
  class AppModule {}
  // #endregion register-sync
  return AppModule;
};

export const asyncFactory = () =>
  // #region register-async-factory
  DbLockModule.forRootAsync({
    imports: [ConfigModule.forRoot()],
    inject: [ConfigService],
    // ConfigService gives environment variables as strings: '5000' is read as 5000.
    useFactory: (config: ConfigService): DbLockModuleOptions => ({ leaseMs: config.get('LOCK_LEASE_MS') }),
    isGlobal: true, // static: decides providers, so not returned by the factory
    dataSourceName: 'default', // static: which TypeORM DataSource holds the tables
  });
// #endregion register-async-factory

// #region register-async-class
@Injectable()
export class LockSettings implements DbLockOptionsFactory {
  constructor(private readonly config: ConfigService) {}

  createDbLockOptions(): DbLockModuleOptions {
    return { namespace: this.config.get('APP_NAME', 'app'), timeoutMs: this.config.get('LOCK_TIMEOUT_MS', 10_000) };
  }
}

// Built inside DbLockModule, with its dependencies from `imports`:
export const byClass = DbLockModule.forRootAsync({ imports: [ConfigModule], useClass: LockSettings });
// Or a provider your app already has, exported by an imported module:
export const byExisting = (SettingsModule: new () => unknown) =>
  DbLockModule.forRootAsync({ imports: [SettingsModule], useExisting: LockSettings });
// #endregion register-async-class

// #region feature-module
@Injectable()
export class InvoiceService {
  constructor(private readonly locks: LockService) {} // no DbLockModule import needed: it is global

  async close(invoiceId: number): Promise<void> {
    await this.locks.withLock(`invoice:${invoiceId}`, async () => {
      /* ... */
    });
  }
}

@Module({ providers: [InvoiceService], exports: [InvoiceService] })
export class InvoiceModule {}
// #endregion feature-module

export const namedDataSources = () => {
  // #region named-data-sources
  @Injectable()
  class ReportJob {
    constructor(@InjectLockService('reports') private readonly locks: LockService) {}

    @WriteLock('report:{0}', { dataSourceName: 'reports' })
    async run(reportId: number): Promise<void> {
      await this.locks.manager.query('UPDATE report SET state = ? WHERE id = ?', ['running', reportId]);
    }
  }

  @Module({
    imports: [
      TypeOrmModule.forRoot({ name: 'billing', type: 'mysql', url: process.env.BILLING_URL, autoLoadEntities: true }),
      TypeOrmModule.forRoot({ name: 'reports', type: 'mysql', url: process.env.REPORTS_URL, autoLoadEntities: true }),
      DbLockModule.forRoot({ dataSourceName: 'billing' }),
      DbLockModule.forRoot({ dataSourceName: 'reports' }),
    ],
    providers: [ReportJob],
  })
  class AppModule {}
  // #endregion named-data-sources
  return AppModule;
};

export const clsSetup = () => {
  // #region cls-setup
  @Module({
    imports: [
      TypeOrmModule.forRoot({ type: 'mysql', url: process.env.DATABASE_URL, autoLoadEntities: true }),
      ClsModule.forRoot({
        global: true,
        middleware: { mount: true },
        plugins: [new ClsPluginTransactional({ adapter: new TransactionalAdapterTypeOrm({ dataSourceToken: getDataSourceToken() }) })],
      }),
      DbLockModule.forRoot(), // finds the TransactionHost at bootstrap: nothing to configure
    ],
  })
  class AppModule {}
  // #endregion cls-setup
  return AppModule;
};

// #region cls-usage
@Injectable()
export class AuditLog {
  constructor(private readonly txHost: TransactionHost<TransactionalAdapterTypeOrm>) {}

  @Transactional() // joins the caller's transaction: inside a locked method, the fenced one
  async record(accountId: number, what: string): Promise<void> {
    await this.txHost.tx.query('INSERT INTO audit (account_id, what) VALUES (?, ?)', [accountId, what]);
  }
}

@Injectable()
export class AccountService {
  constructor(
    private readonly txHost: TransactionHost<TransactionalAdapterTypeOrm>,
    private readonly audit: AuditLog,
  ) {}

  @WriteLock('account:{0}')
  async credit(accountId: number, cents: number): Promise<void> {
    // txHost.tx is the fenced transaction here: both writes commit only if the lock is still ours.
    await this.txHost.tx.getRepository(Account).increment({ id: accountId }, 'balance', cents);
    await this.audit.record(accountId, `credit ${cents}`);
  }
}
// #endregion cls-usage

// #region escaped-write
@Injectable()
export class PaymentService {
  constructor(
    private readonly locks: LockService,
    @InjectRepository(Account) private readonly accounts: Repository<Account>,
  ) {}

  // Wrong: `this.accounts` writes through the app's pool, outside the fenced transaction.
  @WriteLock('account:{0}')
  async payWrong(accountId: number): Promise<void> {
    await this.locks.manager.update(Account, { id: accountId }, { balance: 0 }); // fenced: holds the row lock
    await this.accounts.update({ id: accountId }, { balance: 10 }); // waits for that lock: EscapedWriteError after 1 s
  }

  // Right: every write through the fenced transaction.
  @WriteLock('account:{0}')
  async pay(accountId: number): Promise<void> {
    const accounts = this.locks.manager.getRepository(Account);
    await accounts.update({ id: accountId }, { balance: 0 });
    await accounts.update({ id: accountId }, { balance: 10 });
  }
}
// #endregion escaped-write

// #region escaped-writes-option
export const strict = DbLockModule.forRoot({ escapedWrites: 'error' }); // refuse such writes before they are sent
export const quiet = DbLockModule.forRoot({ escapedWrites: 'ignore' }); // no check (writes outside the fence are meant)
// #endregion escaped-writes-option
