import 'reflect-metadata';
import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { DataSource, type QueryRunner } from 'typeorm';
import { TestDatabase } from '../support/test-database.js';
import { createLockApp } from '../support/lock-app.js';
import { DbLockError } from '../../lib/index.js';
import { contractSuite } from '../support/contract-targets.js';

/**
 * app.close() while a row-lock caller waits for a DataSource connection that the app's own work
 * holds (it has its slot; TypeORM's pool has no connection free). README (shutdown): waiting
 * callers are rejected; a caller "waits for one only within its timeoutMs". Shutdown must not sit
 * out that caller's whole budget, and the caller must get a typed rejection at shutdown.
 */
contractSuite('holder-connection', 'shutdown while a row-lock caller waits for a pool connection held by the app', { postgres: true }, (target) => {
  let db: TestDatabase;
  before(async () => {
    db = await TestDatabase.forTarget(target);
  });
  after(async () => {
    await db?.drop();
  });

  it('close() ends promptly and the caller is rejected with a DbLockError', { timeout: 30_000 }, async () => {
    const { app, locks } = await createLockApp(db.settings, target.options({ janitor: false, shutdownTimeoutMs: 500 }), { poolSize: 2 });
    const ds = app.get(DataSource);
    await locks.withLock('sc:x', async () => undefined);
    const runners: QueryRunner[] = [ds.createQueryRunner(), ds.createQueryRunner()];
    try {
      for (const r of runners) await r.connect(); // the app's own work holds every connection
      const t0 = performance.now();
      let settledAt = 0;
      const caller = locks.acquire('sc:x', { timeoutMs: 8_000 }).then(
        async (h) => {
          settledAt = performance.now() - t0;
          await h.release().catch(() => undefined);
          return 'granted' as unknown;
        },
        (e: unknown) => {
          settledAt = performance.now() - t0;
          return e;
        },
      );
      await new Promise((r) => setTimeout(r, 300));
      const c0 = performance.now();
      const closed = app.close().then(() => performance.now() - c0);
      const closeMs = await Promise.race([closed, new Promise<number>((r) => setTimeout(() => r(-1), 4_000))]);
      const outcome = await Promise.race([caller, new Promise((r) => setTimeout(() => r('still pending'), 1_000))]);
      console.log(
        `# ${db.type}: close took ${closeMs.toFixed(0)} ms; the caller settled ${settledAt.toFixed(0)} ms after it began with ${String(outcome)}`,
      );
      assert.ok(
        closeMs >= 0 && closeMs < 3_000,
        `app.close() ${closeMs < 0 ? 'had not returned 4 s after it began' : `took ${closeMs.toFixed(0)} ms`} while a row-lock caller (timeoutMs 8000) waited for a DataSource connection; the caller ${
          settledAt ? `settled ${settledAt.toFixed(0)} ms after it began` : 'was still pending'
        } with ${String(outcome)}`,
      );
      assert.ok(outcome instanceof DbLockError, `the waiting caller after close: ${String(outcome)}; expected a typed DbLockError`);
    } finally {
      for (const r of runners) await r.release().catch(() => undefined);
      await app.close().catch(() => undefined);
    }
  });
});
