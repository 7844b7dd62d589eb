import { after, before, it } from 'node:test';
import { contractSuite } from '../support/contract-targets.js';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import { LockTimeoutError, type LockHandle, type LockService, type LockStrategyName } from '../../lib/index.js';
import { createLockApp, eventually } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';

/**
 * `writerPreference: false` lets lease readers in beside readers while a writer waits; row-lock
 * readers always give way, as the README says (the server queues a new shared row lock behind a
 * waiting exclusive one), and the late reader times out typed. Three apps (three pools, three sets of sessions, as three processes): A holds the key
 * for reading, B's writer waits for it, C asks for it for reading with 1 s of budget while only
 * readers hold it. Negative control: the same scenario under the lease strategy grants C.
 */
const LATE_READER_BUDGET_MS = 1_000;

contractSuite('lease-writer-preference', 'writerPreference false: lease readers barge, row-lock readers give way', { postgres: true }, (target) => {
  if (target.strategy !== 'lease') return;
  let db: TestDatabase;
  const apps: { app: INestApplicationContext; locks: LockService }[] = [];
  before(async () => {
    db = await TestDatabase.forTarget(target);
  });
  after(async () => {
    for (const a of apps) await a.app.close();
    await db?.drop();
  });

  async function scenario(strategy: LockStrategyName): Promise<unknown> {
    const [a, b, c] = await Promise.all([0, 1, 2].map(() => createLockApp(db.settings, { strategy, janitor: false, writerPreference: false })));
    apps.push(a!, b!, c!);
    const key = `wp-off-${strategy}`;
    await a!.locks.withLock(key, () => undefined); // the key row exists
    const first = await a!.locks.acquire(key, { mode: 'read' });
    const writer = b!.locks.acquire(key, { timeoutMs: 20_000 });
    // The writer is waiting: in the server (row-lock), or refused at least once and polling (lease).
    if (strategy === 'row-lock') await eventually(async () => (await db.lockWaits()) > 0, 5_000, 'the writer waiting in the server');
    else {
      await eventually(() => b!.locks.stats().waiting > 0, 5_000, 'the writer waiting');
      await new Promise((r) => setTimeout(r, 300)); // a few refused polls, the key marked
    }
    const late = await c!.locks.acquire(key, { mode: 'read', timeoutMs: LATE_READER_BUDGET_MS }).catch((e: unknown) => e);
    if ((late as LockHandle).release) await (late as LockHandle).release();
    await first.release();
    await (await writer).release();
    return late;
  }

  it('lease (control): a new reader is granted while a reader holds and a writer waits', async () => {
    const late = await scenario('lease');
    assert.ok(!(late instanceof Error), `the late reader was refused: ${String(late)}`);
  });

  it('row-lock: a new reader waits behind the waiting writer, whatever writerPreference says', async () => {
    const late = await scenario('row-lock');
    assert.ok(late instanceof LockTimeoutError, `the late reader was not held back: ${String(late)}`);
  });
});
