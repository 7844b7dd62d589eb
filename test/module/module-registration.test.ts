import 'reflect-metadata';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Inject, Injectable, Module } from '@nestjs/common';
import { ConfigModule, ConfigService } from '@nestjs/config';
import { DbLockModule, type DbLockModuleOptions, type DbLockOptionsFactory, DbLockOptionsError, LockService } from '../../lib/index.js';
import { bootLockApp } from '../support/boot-app.js';
import { TestDatabase } from '../support/test-database.js';

/**
 * DbLockModule follows Nest's ConfigurableModuleBuilder conventions: forRootAsync with useFactory,
 * useClass or useExisting (a DbLockOptionsFactory), typed inject, imports; isGlobal and
 * dataSourceName stay static; LockService is global by default, so feature modules inject it.
 */
const LEASE = 'LEASE_SETTING';

@Module({ providers: [{ provide: LEASE, useValue: 6_000 }], exports: [LEASE] })
class LeaseModule {}

/** `useClass`: instantiated inside DbLockModule, with its own dependencies from `imports`. */
@Injectable()
class LockOptionsFromClass implements DbLockOptionsFactory {
  constructor(@Inject(LEASE) private readonly leaseMs: number) {}
  createDbLockOptions(): DbLockModuleOptions {
    return { leaseMs: this.leaseMs, namespace: 'from-class' };
  }
}

/** `useExisting`: a provider the app already has, exported by an imported module. */
@Injectable()
class AppLockSettings implements DbLockOptionsFactory {
  async createDbLockOptions(): Promise<DbLockModuleOptions> {
    return { leaseMs: 9_000, namespace: 'existing' };
  }
}
@Module({ providers: [AppLockSettings], exports: [AppLockSettings] })
class AppSettingsModule {}

/** A feature provider in its own module, which does not import DbLockModule. */
@Injectable()
class InvoiceService {
  constructor(readonly locks: LockService) {}
}
@Module({ providers: [InvoiceService], exports: [InvoiceService] })
class InvoiceModule {}

describe('DbLockModule registration conventions', () => {
  let db: TestDatabase;
  before(async () => {
    db = await TestDatabase.create();
  });
  after(async () => {
    await db?.drop();
  });

  it('forRootAsync useClass: the factory class is built in the module with its imports', async () => {
    const { app, locks } = await bootLockApp(db.settings, DbLockModule.forRootAsync({ imports: [LeaseModule], useClass: LockOptionsFromClass }));
    try {
      assert.equal(locks.options.leaseMs, 6_000);
      assert.equal(locks.options.namespace, 'from-class');
    } finally {
      await app.close();
    }
  });

  it('forRootAsync useExisting: an existing provider gives the options', async () => {
    const { app, locks } = await bootLockApp(db.settings, DbLockModule.forRootAsync({ imports: [AppSettingsModule], useExisting: AppLockSettings }));
    try {
      assert.equal(locks.options.leaseMs, 9_000);
      assert.equal(locks.options.namespace, 'existing');
    } finally {
      await app.close();
    }
  });

  it("the README's ConfigService example works with the string an environment variable gives", async () => {
    const readme = () =>
      DbLockModule.forRootAsync({
        imports: [ConfigModule.forRoot({ ignoreEnvFile: true })],
        inject: [ConfigService],
        useFactory: (config: ConfigService) => ({ leaseMs: config.get('LOCK_LEASE_MS') }),
        isGlobal: true,
        dataSourceName: 'default',
      });
    process.env.LOCK_LEASE_MS = '5000';
    try {
      const { app, locks } = await bootLockApp(db.settings, readme());
      try {
        assert.equal(typeof app.get(ConfigService).get('LOCK_LEASE_MS'), 'string', 'ConfigService returns the raw string');
        assert.equal(locks.options.leaseMs, 5_000);
        const lock = await locks.acquire('env');
        assert.equal(Number((await db.logRows('env'))[0]!.lease_ms), 5_000, 'the configured lease reached the grant');
        await lock.release();
      } finally {
        await app.close();
      }
    } finally {
      delete process.env.LOCK_LEASE_MS;
    }
    const { app, locks } = await bootLockApp(db.settings, readme());
    try {
      assert.equal(locks.options.leaseMs, 30_000, 'unset variable: the default');
    } finally {
      await app.close();
    }
  });

  it('forRootAsync arguments are checked when the module is built: exactly one form, inject an array', () => {
    const problems = (options: unknown): string => {
      try {
        DbLockModule.forRootAsync(options as never);
      } catch (error) {
        assert.ok(error instanceof DbLockOptionsError, String(error));
        return error.message;
      }
      return assert.fail('accepted');
    };
    assert.match(problems({}), /exactly one of useFactory, useClass or useExisting, got none/);
    assert.match(problems({ useFactory: () => ({}), useClass: LockOptionsFromClass }), /got useFactory, useClass/);
    assert.match(problems({ useFactory: 'soon' }), /useFactory must be a function or class, got 'soon'/);
    assert.match(problems({ useFactory: () => ({}), inject: ConfigService }), /inject must be an array/);
    assert.match(problems({ useFactory: () => ({}), isGlobal: 'yes' }), /isGlobal must be a boolean/);
    assert.match(problems(null), /options must be an object/);
    assert.throws(() => DbLockModule.forRoot('fast' as never), DbLockOptionsError);
  });

  it('isGlobal defaults to true: a feature module injects LockService after one forRoot() in the root module', async () => {
    const { app, locks } = await bootLockApp(db.settings, DbLockModule.forRoot(), { imports: [InvoiceModule] });
    try {
      assert.equal(app.get(InvoiceService).locks, locks);
    } finally {
      await app.close();
    }
  });

  it('isGlobal: false keeps LockService to the module that imports DbLockModule', async () => {
    await assert.rejects(
      bootLockApp(db.settings, DbLockModule.forRoot({ isGlobal: false }), { imports: [InvoiceModule], logger: false }),
      /can't resolve dependencies of the InvoiceService/,
    );
    const { app, locks } = await bootLockApp(db.settings, DbLockModule.forRoot({ isGlobal: false }));
    try {
      assert.ok(locks instanceof LockService, 'the importing module still has it');
    } finally {
      await app.close();
    }
  });
});
