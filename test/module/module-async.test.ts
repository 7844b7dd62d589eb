import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Inject, Injectable, Module } from '@nestjs/common';
import { ConfigModule, ConfigService } from '@nestjs/config';
import { TestDatabase } from '../support/test-database.js';
import { bootLockApp } from '../support/boot-app.js';
import { DbLockModule, type DbLockModuleOptions, DbLockOptionsError, LockService, LockTimeoutError } from '../../lib/index.js';

/**
 * DbLockModule.forRootAsync: options from an injected config service reach the LockService,
 * and invalid async options fail at bootstrap with the same DbLockOptionsError as forRoot.
 */
const SETTINGS = 'LOCK_SETTINGS';

/** A small hand-written settings provider, resolved asynchronously. */
@Module({
  providers: [{ provide: SETTINGS, useFactory: async () => ({ leaseMs: 7_000, namespace: 'custom', timeoutMs: 100 }) }],
  exports: [SETTINGS],
})
class SettingsModule {}

/** A feature provider that does not import DbLockModule: it finds LockService only if the module is global. */
@Injectable()
class Feature {
  constructor(@Inject(LockService) readonly locks: LockService) {}
}

describe('DbLockModule.forRootAsync', () => {
  let db: TestDatabase;
  before(async () => {
    db = await TestDatabase.create();
  });
  after(async () => {
    await db?.drop();
  });

  it('takes its options from @nestjs/config ConfigService', async () => {
    const config = ConfigModule.forRoot({
      ignoreEnvFile: true,
      load: [() => ({ lock: { leaseMs: 4_321, namespace: 'cfg', timeoutMs: 250 } satisfies DbLockModuleOptions })],
    });
    const { app, locks } = await bootLockApp(
      db.settings,
      DbLockModule.forRootAsync({
        imports: [config],
        inject: [ConfigService],
        useFactory: (service: ConfigService) => service.getOrThrow<DbLockModuleOptions>('lock'),
      }),
    );
    try {
      assert.equal(locks.options.leaseMs, 4_321);
      assert.equal(locks.options.namespace, 'cfg');
      assert.equal(locks.options.timeoutMs, 250);
      assert.ok(Object.isFrozen(locks.options));
      const lock = await locks.acquire('a');
      const [row] = await db.logRows('cfg:a');
      assert.equal(Number(row!.lease_ms), 4_321, 'the configured lease reached the grant');
      // The configured default wait budget applies.
      await assert.rejects(locks.acquire('a'), (error: unknown) => error instanceof LockTimeoutError && error.timeoutMs === 250);
      await lock.release();
    } finally {
      await app.close();
    }
  });

  it('takes its options from a small async provider, and isGlobal exports LockService everywhere', async () => {
    const { app, locks } = await bootLockApp(
      db.settings,
      DbLockModule.forRootAsync({
        isGlobal: true,
        imports: [SettingsModule],
        inject: [SETTINGS],
        useFactory: async (settings: DbLockModuleOptions) => ({ ...settings, retryMaxDelayMs: 50 }),
      }),
      { providers: [Feature] },
    );
    try {
      assert.equal(locks.options.leaseMs, 7_000);
      assert.equal(locks.options.namespace, 'custom');
      assert.equal(locks.options.retryMaxDelayMs, 50);
      assert.equal(app.get(Feature).locks, locks);
      const lock = await app.get(Feature).locks.acquire('b');
      assert.equal((await db.logRows('custom:b')).length, 1);
      await lock.release();
    } finally {
      await app.close();
    }
  });

  it('invalid async options fail at bootstrap with DbLockOptionsError listing every problem, like forRoot', async () => {
    const bad = { leaseMs: -1, timeoutMs: 'soon', bogus: true };
    const problemsOf = async (module: ReturnType<typeof DbLockModule.forRoot>): Promise<readonly string[]> => {
      try {
        const { app } = await bootLockApp(db.settings, module, { logger: false });
        await app.close();
      } catch (error) {
        assert.ok(error instanceof DbLockOptionsError, `expected DbLockOptionsError, got ${String(error)}`);
        return error.problems;
      }
      assert.fail('bootstrap succeeded with invalid options');
    };
    const asyncProblems = await problemsOf(DbLockModule.forRootAsync({ useFactory: async () => bad as never }));
    assert.equal(asyncProblems.length, 3, asyncProblems.join('\n'));
    assert.ok(asyncProblems.some((p) => /leaseMs .*-1/.test(p)));
    assert.ok(asyncProblems.some((p) => /timeoutMs .*'soon'/.test(p)));
    assert.ok(asyncProblems.some((p) => /unknown option 'bogus'/.test(p)));
    assert.deepEqual(await problemsOf(DbLockModule.forRoot(bad as never)), asyncProblems);
    const notAnObject = await problemsOf(DbLockModule.forRootAsync({ useFactory: () => 'fast' as never }));
    assert.match(notAnObject.join('\n'), /options must be an object/);
  });

  it('a factory returning nothing gets the defaults', async () => {
    const { app, locks } = await bootLockApp(db.settings, DbLockModule.forRootAsync({ useFactory: () => undefined as never }));
    try {
      assert.equal(locks.options.leaseMs, 30_000);
      assert.equal(locks.options.timeoutMs, 10_000);
    } finally {
      await app.close();
    }
  });
});
