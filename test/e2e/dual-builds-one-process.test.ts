import 'reflect-metadata';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { type INestApplicationContext, Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { TypeOrmModule } from '@nestjs/typeorm';
import { cjs, esm, type Lib } from '../support/dual-builds.js';
import { testDataSourceOptions } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';

/**
 * The dual-package hazard is harmless: in ONE process, with both builds loaded (see
 * support/dual-builds.ts), a decorator of one build locks through the LockService a module of the
 * other build registered, and errors of one build are `instanceof` the other build's classes.
 */
/** Increments with a gap between read and write: concurrent calls lose updates unless serialised. */
abstract class CounterBase {
  value = 0;
  active = 0;
  maxActive = 0;

  protected async bump(): Promise<void> {
    this.active++;
    this.maxActive = Math.max(this.maxActive, this.active);
    const seen = this.value;
    await sleep(5);
    this.value = seen + 1;
    this.active--;
  }

  reset(): void {
    this.value = this.active = this.maxActive = 0;
  }
}

/** Decorated through the CommonJS build. */
@Injectable()
class CjsDecoratedCounter extends CounterBase {
  @cjs.WriteLock('dual:counter')
  async increment(): Promise<void> {
    await this.bump();
  }

  @cjs.WriteLock('dual:busy', { timeoutMs: 0 })
  async busy(): Promise<void> {}

  /** The control: no lock. */
  async unlocked(): Promise<void> {
    await this.bump();
  }
}

/** Decorated through the ES module build. */
@Injectable()
class EsmDecoratedCounter extends CounterBase {
  @esm.WriteLock('dual:counter')
  async increment(): Promise<void> {
    await this.bump();
  }

  @esm.WriteLock('dual:busy', { timeoutMs: 0 })
  async busy(): Promise<void> {}
}

describe('both builds in one process: decorators and errors cross the build boundary', () => {
  let db: TestDatabase;
  before(async () => {
    esm.LockServiceRegistry.reset();
    db = await TestDatabase.create('dblock_dual');
  });
  after(async () => {
    await db?.drop();
  });

  async function boot(moduleBuild: Lib, counter: new () => CounterBase): Promise<INestApplicationContext> {
    @Module({
      imports: [TypeOrmModule.forRoot(testDataSourceOptions(db.settings)), moduleBuild.DbLockModule.forRoot({ namespace: 'fx' })],
      providers: [counter],
    })
    class DualModule {}
    const app = await NestFactory.createApplicationContext(DualModule, { logger: ['error', 'warn'] });
    await app.init();
    return app;
  }

  async function released(key: string): Promise<number> {
    const rows = await db.logRows(`fx:${key}`);
    assert.ok(
      rows.every((row) => row.status === 'RELEASED'),
      `every log row of ${key} is RELEASED: ${rows.map((r) => String(r.status)).join(',')}`,
    );
    return rows.length;
  }

  it('before any module is ready, a CommonJS decorator throws a DbLockNotInitializedError the ES module build recognises', async () => {
    const counter = new CjsDecoratedCounter();
    await assert.rejects(counter.increment(), (error: unknown) => {
      assert.ok(error instanceof esm.DbLockNotInitializedError, String(error));
      assert.ok(error instanceof esm.DbLockError);
      assert.equal(error instanceof esm.LockTimeoutError, false);
      assert.equal(error.dataSourceName, 'default');
      return true;
    });
  });

  it('DbLockModule from the ES module build, @WriteLock from the CommonJS build: the method runs under the lock', async () => {
    const app = await boot(esm, CjsDecoratedCounter);
    try {
      const service = app.get(esm.LockService);
      assert.equal(cjs.LockServiceRegistry.get('default'), service, "the CommonJS registry sees the ES module build's service");
      const counter = app.get(CjsDecoratedCounter);

      await Promise.all(Array.from({ length: 4 }, () => counter.unlocked()));
      assert.equal(counter.value, 1, 'control: without the lock, concurrent increments lose updates');
      counter.reset();

      await Promise.all(Array.from({ length: 8 }, () => counter.increment()));
      assert.equal(counter.value, 8, 'no lost update');
      assert.equal(counter.maxActive, 1, 'one holder at a time');
      assert.equal(await released('dual:counter'), 8, 'eight acquisitions, all released');

      // An error thrown by the ES module build's engine, caught against the CommonJS classes.
      const holder = await service.acquire('dual:busy');
      try {
        await assert.rejects(counter.busy(), (error: unknown) => {
          assert.ok(error instanceof esm.LockTimeoutError, 'thrown by the ES module build');
          assert.ok(error instanceof cjs.LockTimeoutError, 'instanceof the CommonJS class');
          assert.ok(error instanceof cjs.DbLockError);
          assert.equal(error instanceof cjs.LockLostError, false);
          assert.equal(error.name, 'LockTimeoutError');
          assert.deepEqual(error.keys, ['dual:busy']);
          return true;
        });
      } finally {
        await holder.release();
      }
    } finally {
      await app.close();
    }
    assert.throws(() => cjs.LockServiceRegistry.get('default'), cjs.DbLockNotInitializedError, 'closing the app unregistered the service');
  });

  it('DbLockModule from the CommonJS build, @WriteLock from the ES module build: the same the other way round', async () => {
    const app = await boot(cjs, EsmDecoratedCounter);
    try {
      const service = app.get(cjs.LockService);
      assert.equal(esm.LockServiceRegistry.get('default'), service);
      const counter = app.get(EsmDecoratedCounter);
      await Promise.all(Array.from({ length: 8 }, () => counter.increment()));
      assert.equal(counter.value, 8);
      assert.equal(counter.maxActive, 1);
      assert.equal(await released('dual:counter'), 16);

      const holder = await service.acquire('dual:busy');
      try {
        await assert.rejects(counter.busy(), (error: unknown) => error instanceof esm.LockTimeoutError && error instanceof cjs.LockTimeoutError);
      } finally {
        await holder.release();
      }
    } finally {
      await app.close();
    }
  });
});
