import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import { metrics } from '@opentelemetry/api';
import { LockLostError, type LockService, LockTimeoutError } from '../../lib/index.js';
import { createLockApp } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';
import { contractSuite } from '../support/contract-targets.js';

/**
 * With @opentelemetry/api installed but no SDK registered, the library builds no instruments (the
 * API's meter would be its no-op one): every path that would record a figure (grant, timeout,
 * loss) runs and nothing fails. (Without
 * the package at all: test/e2e/cjs-consumer, both module formats.)
 */
contractSuite('metrics', 'OpenTelemetry metrics with no SDK registered (no-op meter)', { postgres: true }, (target) => {
  let db: TestDatabase;
  let app: INestApplicationContext;
  let peerApp: INestApplicationContext;
  let locks: LockService;
  let peer: LockService;
  before(async () => {
    db = await TestDatabase.forTarget(target);
    ({ app, locks } = await createLockApp(db.settings, target.options({ janitor: false })));
    ({ app: peerApp, locks: peer } = await createLockApp(db.settings, target.options({ janitor: false })));
  });
  after(async () => {
    await app?.close();
    await peerApp?.close();
    await db?.drop();
  });

  it('no provider is registered: the global meter provider is the no-op one', () => {
    assert.equal(metrics.getMeterProvider().constructor.name, 'NoopMeterProvider');
  });

  it('grants, timeouts, skips and losses behave as usual', async () => {
    assert.equal(await locks.withLock('plain', (lock) => lock.fencingToken, { name: 'plain' }), 1);
    const held = await peer.acquire('busy');
    await assert.rejects(locks.acquire('busy', { timeoutMs: 50 }), LockTimeoutError);
    assert.equal(await locks.runLocked('busy', () => 1, { onLocked: 'skip', transaction: 'none' }), undefined);
    await held.release();
    const lock = await locks.acquire('evict');
    await locks.forceRelease('evict', 'no-op meter test');
    await assert.rejects(lock.release(), LockLostError);
    assert.equal(locks.stats().acquired, 2);
  });
});
