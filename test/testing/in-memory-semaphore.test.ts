import 'reflect-metadata';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Injectable, type INestApplicationContext, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { LockService, LockServiceRegistry, LockTimeoutError, Semaphore, SemaphoreLimitError } from '../../lib/index.js';
import { DbLockTestingModule } from '../../lib/testing/index.js';
import { eventually } from '../support/lock-app.js';

/** Semaphores on the testing module's in-memory service: the same limit, errors and decorator as on the database. */
@Injectable()
class Uploads {
  inside = 0;
  most = 0;

  constructor(readonly locks: LockService) {}

  @Semaphore('upload', 2, { transaction: 'none', timeoutMs: 5_000 })
  async upload(until: Promise<void>): Promise<number> {
    this.most = Math.max(this.most, ++this.inside);
    await until;
    this.inside--;
    return this.locks.currentLock!.fencingToken;
  }
}

describe('semaphores on the in-memory testing module', () => {
  let app: INestApplicationContext;
  let locks: LockService;
  let uploads: Uploads;

  before(async () => {
    @Module({ imports: [DbLockTestingModule.forRoot()], providers: [Uploads] })
    class TestModule {}
    app = await NestFactory.createApplicationContext(TestModule, { logger: false });
    await app.init();
    locks = app.get(LockService);
    uploads = app.get(Uploads);
  });
  after(async () => {
    await app?.close();
    LockServiceRegistry.reset();
  });

  it('at most `limit` inside; tokens strictly increase; the next caller enters on a release', async () => {
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    const calls = Array.from({ length: 5 }, () => uploads.upload(gate));
    await eventually(() => uploads.inside === 2, 5_000, 'two inside');
    open();
    const tokens = await Promise.all(calls);
    assert.equal(uploads.most, 2);
    assert.deepEqual(
      [...tokens].sort((a, b) => a - b),
      [1, 2, 3, 4, 5],
    );
  });

  it('another limit while permits live: SemaphoreLimitError; a lock of the key waits for the permits', async () => {
    const permit = await locks.acquireSemaphore('mem', 3);
    await assert.rejects(locks.acquireSemaphore('mem', 4, { timeoutMs: 0 }), SemaphoreLimitError);
    await assert.rejects(locks.acquire('mem', { mode: 'read', timeoutMs: 0 }), LockTimeoutError);
    await permit.release();
    const other = await locks.acquireSemaphore('mem', 4, { timeoutMs: 0 });
    assert.equal(other.limit, 4);
    await other.release();
  });
});
