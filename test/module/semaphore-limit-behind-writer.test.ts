import 'reflect-metadata';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createLockApp, eventually } from '../support/lock-app.js';
import { SemaphoreLimitError } from '../../lib/index.js';
import { bothSides, errorView, type Side } from '../testing/parity-support.js';

/**
 * README "A caller naming another limit while unexpired permits of the key are
 * live gets SemaphoreLimitError (limit, currentLimit) and nothing is written". Here permits of
 * limit 2 are live and a writer of the same process waits for them (writer preference holds local
 * permit callers back): a caller naming limit 3 should still get SemaphoreLimitError, at once,
 * rather than wait out its whole budget and get LockTimeoutError. Another process (a second
 * service on the same database) gets SemaphoreLimitError at once for the same question.
 */
describe('another limit asked while a local writer waits for the permits', () => {
  let env: Awaited<ReturnType<typeof bothSides>>;
  before(async () => {
    env = await bothSides({ leaseMs: 5_000 });
  });
  after(async () => {
    await env?.closeAll();
  });

  it('control: another process asking the same, at the same moment, gets SemaphoreLimitError at once', async () => {
    const locks = env.sides.find((s: Side) => s.name === 'database')!.locks;
    const { app, locks: other } = await createLockApp(env.db.settings, { janitor: false, leaseMs: 5_000 });
    try {
      const key = 'limit-behind-writer-control';
      const permit = await locks.acquireSemaphore(key, 2);
      const writer = locks.acquire(key, { timeoutMs: 10_000 });
      await eventually(() => locks.stats().waiting === 1, 5_000, 'writer waiting');
      const started = performance.now();
      const error = await other.acquireSemaphore(key, 3, { timeoutMs: 1_500 }).then(
        async (p) => {
          await p.release();
          return undefined;
        },
        (e: unknown) => e,
      );
      const ms = Math.round(performance.now() - started);
      await permit.release();
      await (await writer).release();
      assert.ok(error instanceof SemaphoreLimitError, `other process: ${JSON.stringify(errorView(error))}`);
      assert.ok(ms < 1_000, `other process took ${ms} ms`);
    } finally {
      await app.close();
    }
  });

  for (const name of ['database', 'memory'] as const) {
    it(`${name}: SemaphoreLimitError at once, not LockTimeoutError after the budget`, async () => {
      const side = env.sides.find((s: Side) => s.name === name)!;
      const locks = side.locks;
      const key = 'limit-behind-writer';
      const permit = await locks.acquireSemaphore(key, 2);
      const writer = locks.acquire(key, { timeoutMs: 10_000 });
      await eventually(() => locks.stats().waiting === 1, 5_000, 'writer waiting');
      const started = performance.now();
      const error = await locks.acquireSemaphore(key, 3, { timeoutMs: 1_500 }).then(
        async (p) => {
          await p.release();
          return undefined;
        },
        (e: unknown) => e,
      );
      const ms = Math.round(performance.now() - started);
      await permit.release();
      await (await writer).release();
      assert.ok(
        error instanceof SemaphoreLimitError,
        `asked limit 3 while permits of limit 2 were live (a local writer waiting): ${JSON.stringify(errorView(error))} after ${ms} ms`,
      );
    });
  }
});
