import 'reflect-metadata';
import { afterEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Injectable, Module, type INestApplicationContext } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { LockService, LockServiceRegistry, WriteLock } from '../../lib/index.js';
import { DbLockTestingModule } from '../../lib/testing/index.js';

@Injectable()
class Jobs {
  constructor(readonly locks: LockService) {}
  @WriteLock('job', { transaction: 'none' })
  async run(): Promise<LockService> {
    return this.locks;
  }
}

async function boot(): Promise<INestApplicationContext> {
  @Module({ imports: [DbLockTestingModule.forRoot()], providers: [Jobs] })
  class AppModule {}
  const app = await NestFactory.createApplicationContext(AppModule, { logger: false, abortOnError: false });
  await app.init();
  return app;
}

/**
 * README (Errors): DbLockNotInitializedError means "used before the module initialised or after
 * shutdown". An app whose module is initialised and not shut down must keep working when another
 * app of the same process (a second test module, a second Nest app) starts and stops.
 */
describe('the decorator registry with two apps in one process', () => {
  afterEach(() => LockServiceRegistry.reset());

  it('closing a second app does not cut the decorators of the first, still running one', async () => {
    const first = await boot();
    assert.ok((await first.get(Jobs).run()) instanceof LockService, 'first app works alone');
    const second = await boot();
    await second.close();
    try {
      // `first` is initialised and not shut down: its decorated method must still run.
      await first.get(Jobs).run();
    } finally {
      await first.close();
    }
  });
});
