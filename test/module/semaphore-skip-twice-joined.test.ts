import 'reflect-metadata';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Injectable, type INestApplicationContext } from '@nestjs/common';
import { TestDatabase } from '../support/test-database.js';
import { createLockApp } from '../support/lock-app.js';
import { LockService, Semaphore, WriteLock } from '../../lib/index.js';

@Injectable()
class Svc {
  constructor(readonly locks: LockService) {}

  @Semaphore('hs:{0}', 2, { onLocked: 'skip' })
  async helper(k: string): Promise<string | undefined> {
    await this.locks.manager.query('SELECT 1');
    return 'ran';
  }

  @WriteLock('hso:{0}')
  async outer(k: string): Promise<(string | undefined)[]> {
    return Promise.all([this.helper(k), this.helper(k)]);
  }
}

describe('an onLocked skip @Semaphore helper called twice at once inside a fenced call', () => {
  let db: TestDatabase;
  let app: INestApplicationContext;
  before(async () => {
    db = await TestDatabase.create();
    ({ app } = await createLockApp(db.settings, { janitor: false, leaseMs: 5_000 }, { providers: [Svc] }));
  });
  after(async () => {
    await app?.close();
    await db?.drop();
  });

  it('both run (a free semaphore of 2; the second reuses the first permit or takes its own), none skipped', async () => {
    assert.deepEqual(await app.get(Svc).outer('a'), ['ran', 'ran']);
  });
});
