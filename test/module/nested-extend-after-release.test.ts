import 'reflect-metadata';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import { LockLostError, type LockService } from '../../lib/index.js';
import { createLockApp } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';

/**
 * A handle a call chain got for a key it already held (reentrant) shares the outer lock's lease.
 * Once that handle is released it is done: extend() refuses as a released lock's does, and the
 * outer lock's lease is left as it was.
 */
describe('a released reentrant handle extends nothing', () => {
  let db: TestDatabase;
  let app: INestApplicationContext;
  let locks: LockService;
  before(async () => {
    db = await TestDatabase.create();
    ({ app, locks } = await createLockApp(db.settings, { janitor: false }));
  });
  after(async () => {
    await app?.close();
    await db?.drop();
  });

  it('extend() after release() rejects with LockLostError and leaves the outer lease alone', async () => {
    await locks.withLock(
      'nested:extend',
      async (outer) => {
        const inner = await locks.acquire('nested:extend');
        assert.equal(inner.reentrant, true);
        await inner.extend(60_000); // while it is held, it extends the outer lock
        const extendedTo = outer.expiresAt.getTime();
        assert.ok(extendedTo - Date.now() > 50_000, 'the live reentrant handle extended the outer lease');
        await inner.release();
        assert.equal(inner.released, true);
        await assert.rejects(inner.extend(120_000), (error: unknown) => {
          assert.ok(error instanceof LockLostError, String(error));
          assert.match(error.reason, /already released/);
          return true;
        });
        assert.equal(outer.expiresAt.getTime(), extendedTo, 'the outer lease was not extended by the released handle');
        assert.equal(outer.released, false);
      },
      { leaseMs: 5_000 },
    );
  });
});
