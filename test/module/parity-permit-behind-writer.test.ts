import 'reflect-metadata';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { LockService } from '../../lib/index.js';
import { eventually } from '../support/lock-app.js';
import { bothSides, outcome } from '../testing/parity-support.js';

/** Permits are shared (reported as 'read'): does a new permit caller hold back behind a waiting writer of the key, on both? */
describe('testing module parity: a permit caller beside a writer waiting for the permits', () => {
  let env: Awaited<ReturnType<typeof bothSides>>;
  before(async () => {
    env = await bothSides();
  });
  after(async () => {
    await env?.closeAll();
  });

  async function scenario(locks: LockService, key: string): Promise<unknown> {
    const permit = await locks.acquireSemaphore(key, 3);
    const order: string[] = [];
    const writer = locks.acquire(key, { timeoutMs: 5_000 }).then(async (w) => {
      order.push('writer');
      await w.release();
    });
    await eventually(() => locks.stats().waiting === 1, 5_000, 'writer waiting');
    await new Promise((r) => setTimeout(r, 150));
    const second = await outcome(async () => {
      const p = await locks.acquireSemaphore(key, 3, { timeoutMs: 0 });
      order.push('permit');
      await p.release();
      return 'granted';
    });
    await permit.release();
    await writer;
    return { second: (second as { ok?: string }).ok ?? (second as { error: { ctor: string } }).error.ctor, order };
  }

  it('same outcome', async () => {
    const results: Record<string, unknown> = {};
    for (const side of env.sides) results[side.name] = await scenario(side.locks, `hp2-${side.name}`);
    assert.deepEqual(results.memory, results.database, JSON.stringify(results));
  });
});
