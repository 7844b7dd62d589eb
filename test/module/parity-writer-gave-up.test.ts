import 'reflect-metadata';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { LockService } from '../../lib/index.js';
import { bothSides, outcome } from '../testing/parity-support.js';

/**
 * A writer that gave up (maxAttempts spent, or its timeout) no longer waits: README promises that
 * writer preference holds new readers back only "while a writer waits". One scenario, both services.
 */
describe('testing module parity: a writer that gave up does not keep holding readers back', () => {
  let env: Awaited<ReturnType<typeof bothSides>>;
  before(async () => {
    env = await bothSides();
  });
  after(async () => {
    await env?.closeAll();
  });

  async function afterMaxAttempts(locks: LockService, key: string): Promise<unknown> {
    const reader = await locks.acquire(key, { mode: 'read' });
    const writer = await outcome(() => locks.acquire(key, { timeoutMs: 10_000, maxAttempts: 3 }));
    const started = performance.now();
    const second = await locks.tryAcquire(key, { mode: 'read' });
    const late = await outcome(async () => {
      const h = await locks.acquire(key, { mode: 'read', timeoutMs: 0 });
      await h.release();
      return 'granted';
    });
    const ms = performance.now() - started;
    await second?.release();
    await reader.release();
    return {
      writer: (writer as { error?: { ctor: string } }).error?.ctor,
      secondReader: second === null ? null : 'granted',
      late,
      answeredQuickly: ms < 300,
    };
  }

  async function afterTimeout(locks: LockService, key: string): Promise<unknown> {
    const reader = await locks.acquire(key, { mode: 'read' });
    const writer = await outcome(() => locks.acquire(key, { timeoutMs: 300 }));
    const second = await locks.tryAcquire(key, { mode: 'read' });
    await second?.release();
    await reader.release();
    return { writer: (writer as { error?: { ctor: string } }).error?.ctor, secondReader: second === null ? null : 'granted' };
  }

  for (const [title, scenario] of [
    ['writer out of maxAttempts', afterMaxAttempts],
    ['writer timed out', afterTimeout],
  ] as const) {
    it(title, async () => {
      const results: Record<string, unknown> = {};
      for (const side of env.sides) results[side.name] = await scenario(side.locks, `hp1-${title.length}-${side.name}`);
      assert.deepEqual(results.memory, results.database, JSON.stringify(results));
    });
  }
});
