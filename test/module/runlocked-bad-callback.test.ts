import 'reflect-metadata';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import { DbLockOptionsError, type LockService } from '../../lib/index.js';
import { createLockApp } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';

/**
 * withLock() and withSemaphore() refuse a callback that is not a function with DbLockOptionsError
 * before any lock is taken ("bad input ... no SQL sent"). runLocked() (what the decorators call)
 * and runSemaphore() do the same.
 */
describe('runLocked / runSemaphore refuse a non-function callback before locking', () => {
  let db: TestDatabase;
  let app: INestApplicationContext;
  let locks: LockService;
  before(async () => {
    db = await TestDatabase.create();
    ({ app, locks } = await createLockApp(db.settings));
  });
  after(async () => {
    await app?.close();
    await db?.drop();
  });

  const cases: [title: string, key: string, call: (key: string) => Promise<unknown>][] = [
    ['withLock refuses it before locking (the reference behaviour)', 'fn:w', (key) => locks.withLock(key, undefined as never)],
    ['runLocked(key, undefined) rejects with DbLockOptionsError and takes no lock', 'fn:r', (key) => locks.runLocked(key, undefined as never)],
    [
      "runLocked(key, 'x', { transaction: 'none' }) rejects with DbLockOptionsError and takes no lock",
      'fn:n',
      (key) => locks.runLocked(key, 'x' as never, { transaction: 'none' }),
    ],
    [
      'runSemaphore(key, limit, undefined) rejects with DbLockOptionsError and takes no permit',
      'fn:s',
      (key) => locks.runSemaphore(key, 2, undefined as never),
    ],
  ];
  for (const [title, key, call] of cases)
    it(title, async () => {
      await assert.rejects(call(key), DbLockOptionsError);
      assert.deepEqual(await db.logRows(key), [], 'no lock was taken');
    });
});
