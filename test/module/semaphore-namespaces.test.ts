import 'reflect-metadata';
import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import { TestDatabase } from '../support/test-database.js';
import { createLockApp } from '../support/lock-app.js';
import { SemaphoreLimitError, type LockService } from '../../lib/index.js';
import { contractSuite } from '../support/contract-targets.js';

/**
 * Semaphores under namespaces: the same key in two namespaces is two semaphores
 * (each with its own limit and count); SemaphoreLimitError names the key without the namespace and
 * carries `limit` and `currentLimit`; inspect/listLocks show the permits under their own namespace.
 */
contractSuite('semaphore-calls', 'semaphores in namespaces', { postgres: true }, (target) => {
  let db: TestDatabase;
  let a: INestApplicationContext;
  let b: INestApplicationContext;
  let la: LockService;
  let lb: LockService;
  before(async () => {
    db = await TestDatabase.forTarget(target);
    ({ app: a, locks: la } = await createLockApp(db.settings, target.options({ janitor: false, namespace: 'ns1' })));
    ({ app: b, locks: lb } = await createLockApp(db.settings, target.options({ janitor: false, namespace: 'ns2' })));
  });
  after(async () => {
    await a?.close();
    await b?.close();
    await db?.drop();
  });

  it('two namespaces, two semaphores; typed error fields without the namespace', async () => {
    const a1 = await la.acquireSemaphore('k', 1);
    const b1 = await lb.acquireSemaphore('k', 3, { timeoutMs: 0 });
    const b2 = await lb.acquireSemaphore('k', 3, { timeoutMs: 0 });
    await assert.rejects(la.acquireSemaphore('k', 1, { timeoutMs: 0 }), { name: 'LockTimeoutError' }, 'ns1 full at 1');
    const error = await la.acquireSemaphore('k', 3, { timeoutMs: 0 }).then(
      () => undefined,
      (e: unknown) => e,
    );
    assert.ok(error instanceof SemaphoreLimitError, String(error));
    assert.equal(error.key, 'k');
    assert.equal(error.limit, 3);
    assert.equal(error.currentLimit, 1);
    const listA = await la.listLocks();
    const listB = await lb.listLocks();
    assert.deepEqual(
      listA.locks.map((l) => [l.key, l.mode]),
      [['k', 'permit']],
    );
    assert.deepEqual(
      listB.locks.map((l) => [l.key, l.mode]),
      [
        ['k', 'permit'],
        ['k', 'permit'],
      ],
    );
    assert.equal((await la.inspect('k')).holders.length, 1);
    assert.equal((await lb.inspect('k')).holders.length, 2);
    for (const p of [a1, b1, b2]) await p.release();
  });
});
