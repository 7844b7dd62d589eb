import 'reflect-metadata';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { DataSource, type QueryRunner } from 'typeorm';
import { TestDatabase } from '../support/test-database.js';
import { createLockApp } from '../support/lock-app.js';
import { LockTimeoutError, type LockService } from '../../lib/index.js';

/**
 * README (Connections per process, row-lock): "while your own work holds every connection, a
 * caller waits for one only within its timeoutMs (at least 250 ms), then gets LockTimeoutError".
 * Measured with margins: answer no earlier than max(timeoutMs, 250) − 10 ms, no later than +300 ms.
 */
describe('row-lock caller while the app holds every DataSource connection', () => {
  let db: TestDatabase;
  let locks: LockService;
  let close: () => Promise<void>;
  let runners: QueryRunner[] = [];
  before(async () => {
    db = await TestDatabase.create();
    const made = await createLockApp(db.settings, { strategy: 'row-lock', janitor: false }, { poolSize: 2 });
    locks = made.locks;
    close = () => made.app.close();
    await locks.withLock('ah:k', async () => undefined);
    const ds = made.app.get(DataSource);
    runners = [ds.createQueryRunner(), ds.createQueryRunner()];
    for (const r of runners) await r.connect();
  });
  after(async () => {
    for (const r of runners) await r.release().catch(() => undefined);
    await close?.();
    await db?.drop();
  });

  for (const timeoutMs of [0, 100, 600]) {
    it(`timeoutMs ${timeoutMs}: LockTimeoutError after about max(timeoutMs, 250) ms`, async () => {
      const t0 = performance.now();
      const result = await locks.acquire('ah:k', { timeoutMs }).then(
        async (h) => {
          await h.release();
          return 'granted' as unknown;
        },
        (e: unknown) => e,
      );
      const ms = performance.now() - t0;
      const expected = Math.max(timeoutMs, 250);
      assert.ok(result instanceof LockTimeoutError, `got ${String(result)} (${(result as Error)?.constructor?.name}), expected LockTimeoutError`);
      assert.ok(ms >= expected - 10 && ms <= expected + 300, `answered after ${ms.toFixed(0)} ms, expected about ${expected} ms`);
    });
  }

  it('tryAcquire answers null after the 250 ms connection grace', async () => {
    const t0 = performance.now();
    const result = await locks.tryAcquire('ah:k').catch((e: Error) => e);
    const ms = performance.now() - t0;
    assert.equal(result, null, `tryAcquire gave ${String(result)}`);
    assert.ok(ms >= 240 && ms <= 550, `answered after ${ms.toFixed(0)} ms`);
  });

  it("runLocked onLocked 'skip' skips", async () => {
    const result = await locks.runLocked('ah:k', async () => 'ran', { onLocked: 'skip', transaction: 'none' }).catch((e: Error) => e);
    assert.equal(result, undefined, `skip job: ${String(result)}`);
  });
});
