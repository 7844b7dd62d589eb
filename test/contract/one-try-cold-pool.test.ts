import 'reflect-metadata';
import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import type { LockService } from '../../lib/index.js';
import { createLockApp } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';
import { SlowOpenProxy } from '../support/slow-open-proxy.js';
import { contractSuite } from '../support/contract-targets.js';

/** How long opening each connection takes through the proxy, ms: past the 250 ms a single try's connection was once given. */
const OPEN_DELAY_MS = 600;
const CALLERS = 6;

/** Why the refused ones were refused. */
function refusals(outcomes: PromiseSettledResult<unknown>[]): string {
  return outcomes
    .flatMap((o) =>
      o.status === 'rejected' ? [`${(o.reason as Error).name}: ${(o.reason as Error).message} (cause: ${String((o.reason as Error).cause)})`] : [],
    )
    .join('; ');
}

/**
 * A single try (tryAcquire, timeoutMs 0) on a cold pool: the connections it needs are opened on its
 * way, each slowly (a loaded machine, a distant server). Opening a connection is not waiting for
 * another holder, so every try on a free key must be granted. The negative control shows a try
 * on a held key is still refused, so the suite could see a refusal.
 */
contractSuite('one-try-cold-pool', 'a single try on a cold pool whose connections open slowly', { postgres: true }, (target) => {
  let db: TestDatabase;
  let proxy: SlowOpenProxy;
  let app: INestApplicationContext;
  let locks: LockService;
  before(async () => {
    db = await TestDatabase.forTarget(target);
    proxy = await SlowOpenProxy.start(db.settings, OPEN_DELAY_MS);
    ({ app, locks } = await createLockApp(
      { ...db.settings, host: '127.0.0.1', port: proxy.port },
      target.options({ janitor: false, leaseMs: 10_000 }),
    ));
  });
  after(async () => {
    await app?.close();
    await proxy?.close();
    await db?.drop();
  });

  it(`${CALLERS} single tries on ${CALLERS} free keys at once, each needing a new connection: all granted`, async () => {
    const openedBefore = proxy.opened;
    // acquire with timeoutMs 0 is tryAcquire that says why it was refused.
    const outcomes = await Promise.allSettled(Array.from({ length: CALLERS }, (_, i) => locks.acquire(`free:${i}`, { timeoutMs: 0 })));
    const granted = outcomes.flatMap((o) => (o.status === 'fulfilled' ? [o.value] : []));
    for (const handle of granted) await handle.release();
    assert.ok(proxy.opened > openedBefore, 'the burst opened connections (the pool was cold): otherwise this test proves nothing');
    assert.equal(granted.length, CALLERS, `only ${granted.length} of ${CALLERS} single tries on free keys were granted: ${refusals(outcomes)}`);
  });

  if (target.strategy === 'lease')
    it(`${CALLERS} single-try permits at once on a new semaphore of ${CALLERS}, on a cold pool: all granted`, async () => {
      // A fresh app: its pool has only what its start opened.
      const { app: coldApp, locks: cold } = await createLockApp(
        { ...db.settings, host: '127.0.0.1', port: proxy.port },
        target.options({ janitor: false, leaseMs: 10_000 }),
      );
      try {
        const openedBefore = proxy.opened;
        const outcomes = await Promise.allSettled(Array.from({ length: CALLERS }, () => cold.acquireSemaphore('permits', CALLERS, { timeoutMs: 0 })));
        const granted = outcomes.flatMap((o) => (o.status === 'fulfilled' ? [o.value] : []));
        for (const permit of granted) await permit.release();
        assert.ok(proxy.opened > openedBefore, 'the burst opened connections');
        assert.equal(granted.length, CALLERS, `only ${granted.length} of ${CALLERS} granted: ${refusals(outcomes)}`);
      } finally {
        await coldApp.close();
      }
    });

  it('negative control: a single try on a held key is refused', async () => {
    const held = await locks.acquire('held');
    try {
      assert.equal(await locks.tryAcquire('held'), null);
    } finally {
      await held.release();
    }
  });
});
