import 'reflect-metadata';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { LockTimeoutError } from '../../lib/index.js';
import { eventually } from '../support/lock-app.js';
import { bothSides } from './parity-support.js';

/**
 * docs/guide/read-write-and-multi-key.md, writer preference: "a writer whose own process holds the
 * key for reading waits for that local release without polling; local callers queue first-come
 * first-served, so local readers behind it still wait for it". README: `writerPreference` "while a
 * writer waits, new readers of that key are held back". One LockService, three callers of one key.
 */
describe('parity: writer preference among the callers of one LockService', () => {
  let env: Awaited<ReturnType<typeof bothSides>>;
  before(async () => {
    env = await bothSides();
  });
  after(async () => {
    await env?.closeAll();
  });

  for (const sideName of ['memory', 'database'] as const) {
    it(`[${sideName}] reader holds, a writer waits: a reader arriving after the writer is held back until the writer had its turn`, async () => {
      const side = env.sides.find((s) => s.name === sideName)!;
      const { locks } = side;
      const key = `wp-${sideName}`;
      const first = await locks.acquire(key, { mode: 'read' });
      const order: string[] = [];
      const writer = locks.acquire(key, { timeoutMs: 10_000 }).then(async (w) => {
        order.push('writer');
        await w.release();
      });
      await eventually(() => locks.stats().waiting === 1, 5_000, 'the writer waiting');
      // The reader arrives after the writer; its budget (800 ms) is more than four times the writer mark's first poll (≤ 200 ms).
      const lateReader = locks.acquire(key, { mode: 'read', timeoutMs: 800 }).then(
        async (r) => {
          order.push('late reader');
          await r.release();
          return 'granted';
        },
        (error: unknown) => (error instanceof LockTimeoutError ? 'timed out' : `failed: ${String(error)}`),
      );
      const verdict = await lateReader; // the first reader still holds the key all along
      await first.release();
      await writer;
      assert.equal(verdict, 'timed out', `the late reader was ${verdict} while the writer waited (order: ${order.join(', ')})`);
      assert.deepEqual(order, ['writer']);
    });
  }
});
