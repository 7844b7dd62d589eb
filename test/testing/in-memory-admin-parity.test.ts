import 'reflect-metadata';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { type INestApplicationContext, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { getLockServiceToken, LockService, LockServiceRegistry } from '../../lib/index.js';
import { DbLockTestingModule } from '../../lib/testing/index.js';
import { createLockApp } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';

/**
 * the testing module promises "the same API, the same errors" inside one process, and the
 * README says a permit's `inspect()` and `listLocks()` show its log row's mode, `'permit'`.
 * Side by side: the database-backed service (lease) and the in-memory one, the same calls, the
 * same observations.
 */
describe('in-memory testing module vs the database, side by side', () => {
  let db: TestDatabase;
  let realApp: INestApplicationContext;
  let memApp: INestApplicationContext;
  let real: LockService;
  let mem: LockService;

  before(async () => {
    db = await TestDatabase.create();
    ({ app: realApp, locks: real } = await createLockApp(db.settings, { janitor: false }, {}));
    @Module({ imports: [DbLockTestingModule.forRoot({ dataSourceName: 'memory' })] })
    class InMemoryApp {}
    memApp = await NestFactory.createApplicationContext(InMemoryApp, { logger: false });
    await memApp.init();
    mem = memApp.get<LockService>(getLockServiceToken('memory'));
  });
  after(async () => {
    await memApp?.close();
    await realApp?.close();
    LockServiceRegistry.reset();
    await db?.drop();
  });

  /** What a caller observes of a held permit through the admin calls. */
  async function permitViews(locks: LockService): Promise<Record<string, unknown>> {
    const permit = await locks.acquireSemaphore('views', 2);
    const info = await locks.inspect('views');
    const listed = (await locks.listLocks()).locks.filter((l) => l.key === 'views');
    const evicted = await locks.forceRelease('views', 'parity');
    await permit.release().catch(() => undefined);
    return {
      handleMode: permit.mode,
      inspectMode: info.mode,
      holderModes: info.holders.map((h) => h.mode),
      listedModes: listed.map((l) => l.mode),
      evictedModes: evicted.map((h) => h.mode),
    };
  }

  it("a permit's mode in inspect(), listLocks() and forceRelease() is the same on both ('permit', as the README says)", async () => {
    const onDatabase = await permitViews(real);
    const inMemory = await permitViews(mem);
    assert.deepEqual(onDatabase.holderModes, ['permit'], `database: ${JSON.stringify(onDatabase)}`);
    assert.deepEqual(inMemory, onDatabase, `in memory ${JSON.stringify(inMemory)} vs database ${JSON.stringify(onDatabase)}`);
  });
});
