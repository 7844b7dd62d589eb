import 'reflect-metadata';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { DbLockOptionsError } from '../../lib/index.js';
import { createLockApp } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';

/**
 * withLock() and withSemaphore() refuse a callback that is not a function with DbLockOptionsError
 * before any lock is taken ("bad input ... no SQL sent"). runLocked() (what the decorators call)
 * and runSemaphore() should do the same.
 */
describe('runLocked / runSemaphore refuse a non-function callback before locking', () => {
  let db: TestDatabase;
  before(async () => {
    db = await TestDatabase.create();
  });
  after(async () => {
    await db?.drop();
  });

  it('withLock refuses it before locking (the reference behaviour)', async () => {
    const { app, locks } = await createLockApp(db.settings);
    try {
      await assert.rejects(locks.withLock('fn:w', undefined as never), DbLockOptionsError);
      assert.deepEqual(await db.logRows('fn:w'), [], 'no lock was taken');
    } finally {
      await app.close();
    }
  });

  it('runLocked(key, undefined) rejects with DbLockOptionsError and takes no lock', async () => {
    const { app, locks } = await createLockApp(db.settings);
    try {
      await assert.rejects(locks.runLocked('fn:r', undefined as never), DbLockOptionsError);
      assert.deepEqual(await db.logRows('fn:r'), [], 'no lock was taken');
    } finally {
      await app.close();
    }
  });

  it("runLocked(key, 'x', { transaction: 'none' }) rejects with DbLockOptionsError and takes no lock", async () => {
    const { app, locks } = await createLockApp(db.settings);
    try {
      await assert.rejects(locks.runLocked('fn:n', 'x' as never, { transaction: 'none' }), DbLockOptionsError);
      assert.deepEqual(await db.logRows('fn:n'), [], 'no lock was taken');
    } finally {
      await app.close();
    }
  });

  it('runSemaphore(key, limit, undefined) rejects with DbLockOptionsError and takes no permit', async () => {
    const { app, locks } = await createLockApp(db.settings);
    try {
      await assert.rejects(locks.runSemaphore('fn:s', 2, undefined as never), DbLockOptionsError);
      assert.deepEqual(await db.logRows('fn:s'), [], 'no permit was taken');
    } finally {
      await app.close();
    }
  });
});
