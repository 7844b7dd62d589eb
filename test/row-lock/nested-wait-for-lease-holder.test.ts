import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import type { INestApplicationContext } from '@nestjs/common';
import type { LockService } from '../../lib/index.js';
import { createLockApp } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';
import { contractSuite } from '../support/contract-targets.js';

/**
 * A nested row-lock call inside a row-lock holder's transaction, on a key a lease holder (another
 * call chain) holds for a moment: it waits within its timeoutMs, as a row-lock caller waits
 * outside a transaction, and gets the key once the lease holder lets go.
 */
contractSuite('holder-connection', 'row-lock: a nested take on a key a lease holder holds', { postgres: true }, (target) => {
  let db: TestDatabase;
  let app: INestApplicationContext;
  let locks: LockService;
  before(async () => {
    db = await TestDatabase.forTarget(target);
    ({ app, locks } = await createLockApp(db.settings, { strategy: 'row-lock', escapedWrites: 'ignore' }));
  });
  after(async () => {
    await app?.close();
    await db?.drop();
  });

  it('waits within its budget for the lease holder, rather than timing out at once', async (t) => {
    await locks.runLocked('mx:outer', async () => undefined);
    const lease = await locks.acquire('mx:inner', { strategy: 'lease' });
    const HOLD_MS = 500;
    const released = sleep(HOLD_MS).then(() => lease.release());
    const started = performance.now();
    const outcome = await locks
      .runLocked('mx:outer', () => locks.runLocked('mx:inner', async () => 'inner ran', { timeoutMs: 5_000 }))
      .then(
        (v) => v,
        (e: unknown) => e,
      );
    const elapsed = performance.now() - started;
    await released;
    t.diagnostic(`nested call settled after ${Math.round(elapsed)} ms: ${String(outcome)}`);
    // The lease holder lets go after 500 ms; the nested call's budget is 5 s (4.5 s of margin).
    assert.equal(outcome, 'inner ran', `after ${Math.round(elapsed)} ms: ${String(outcome)}`);
  });
});
