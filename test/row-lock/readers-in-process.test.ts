import { after, before, it } from 'node:test';
import { contractSuite } from '../support/contract-targets.js';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import { LockTimeoutError, type LockService, TooManyLockWaitersError } from '../../lib/index.js';
import { createLockApp, eventually } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';

type App = { app: INestApplicationContext; locks: LockService };

contractSuite('read-write', 'timeouts, slots, audit rows (coverage)', { postgres: true }, (target) => {
  if (target.strategy !== 'row-lock') return;
  let db: TestDatabase;
  const apps: App[] = [];
  const start = async (options: Record<string, unknown>, poolSize?: number): Promise<App> => {
    const a = await createLockApp(db.settings, { janitor: false, strategy: 'row-lock', ...options }, { poolSize });
    apps.push(a);
    return a;
  };
  before(async () => {
    db = await TestDatabase.forTarget(target);
  });
  after(async () => {
    for (const a of apps) await a.app.close();
    await db?.drop();
  });

  it('reader timeoutMs 0 while a writer holds: LockTimeoutError at once; tryAcquire null', async () => {
    const a = await start({});
    const b = await start({});
    const key = 'to0';
    const held = await a.locks.acquire(key);
    const t0 = performance.now();
    const e = await b.locks.acquire(key, { mode: 'read', timeoutMs: 0 }).catch((x: unknown) => x);
    const d0 = performance.now() - t0;
    const t1 = performance.now();
    const tried = await b.locks.tryAcquire(key, { mode: 'read' });
    const d1 = performance.now() - t1;
    const t2 = performance.now();
    const e2 = await b.locks.acquire(key, { mode: 'read', timeoutMs: 150 }).catch((x: unknown) => x);
    const d2 = performance.now() - t2;
    const e3 = await b.locks.acquire([key, 'to0-other'], { mode: 'read', timeoutMs: 150 }).catch((x: unknown) => x);
    const e4 = await b.locks
      .acquire(
        [
          { key, mode: 'read' },
          { key: 'to0-w', mode: 'write' },
        ],
        { timeoutMs: 0 },
      )
      .catch((x: unknown) => x);
    await held.release();
    assert.ok(e instanceof LockTimeoutError, String(e));
    assert.ok(d0 < 300, `timeoutMs 0 took ${d0}`);
    assert.equal(tried, null);
    assert.ok(d1 < 300, `tryAcquire took ${d1}`);
    assert.ok(e2 instanceof LockTimeoutError, String(e2));
    assert.ok(d2 >= 149 && d2 < 450, `150ms took ${d2}`);
    assert.ok(e3 instanceof LockTimeoutError, String(e3));
    assert.ok(e4 instanceof LockTimeoutError, String(e4));
    // nothing held afterwards
    const w = await a.locks.tryAcquire(['to0', 'to0-other', 'to0-w']);
    assert.ok(w);
    await w.release();
  });

  it('maxRowLockWaiters with readers', async () => {
    const a = await start({ maxRowLockWaiters: 1 }, 3);
    const key = 'mrw';
    const r1 = await a.locks.acquire(key, { mode: 'read' });
    const r2 = await a.locks.acquire(key, { mode: 'read' });
    const r3 = a.locks.acquire(key, { mode: 'read', timeoutMs: 5_000 });
    await new Promise((r) => setTimeout(r, 100));
    const e = await a.locks.acquire(key, { mode: 'read', timeoutMs: 5_000 }).catch((x: unknown) => x);
    await r1.release();
    const h3 = await r3;
    await r2.release();
    await h3.release();
    assert.ok(e instanceof TooManyLockWaitersError, String(e));
  });

  it('audit rows of readers: released, failed', async () => {
    const a = await start({});
    const key = 'audit-r';
    await a.locks.withLock(key, async () => undefined);
    await a.locks.withLock(key, async () => undefined, { mode: 'read' });
    await a.locks
      .withLock(
        key,
        async () => {
          throw new Error('boom');
        },
        { mode: 'read' },
      )
      .catch(() => undefined);
    // A rolled-back hold's row is written after its rollback, off the caller's path: waited for
    // here, so that the rows below read in the calls' order.
    await eventually(async () => (await db.logRows(key)).length >= 3, 3_000, "the failed reader's row");
    await a.locks.runLocked(key, async () => undefined, { mode: 'read' });
    await a.locks
      .runLocked(
        key,
        async () => {
          throw new Error('boom');
        },
        { mode: 'read' },
      )
      .catch(() => undefined);
    await eventually(async () => (await db.logRows(key)).length >= 5, 3_000, 'rows');
    const rows = await db.logRows(key);
    assert.deepEqual(
      rows.map((r) => [r.mode, r.status, Number(r.fencing_token)]),
      [
        ['write', 'RELEASED', 1],
        ['read', 'RELEASED', 1],
        ['read', 'FAILED', 1],
        ['read', 'RELEASED', 1],
        ['read', 'FAILED', 1],
      ],
    );
  });
});
