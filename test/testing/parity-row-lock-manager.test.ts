import 'reflect-metadata';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { EntityManager } from 'typeorm';
import { bothSides, differences, outcome } from './parity-support.js';

/**
 * With the row-lock strategy, withLock's `fn` "runs inside the locking transaction
 * (`lockService.manager`)" (LockService.withLock JSDoc; `manager`: "or any row-lock call"). The
 * testing module answers to both strategy names and hands out the test's `manager` "inside a
 * fenced call": the same code (withLock + lockService.manager under strategy 'row-lock') must run
 * unchanged in a unit test.
 */
describe('parity: lockService.manager inside a row-lock withLock()', () => {
  const fakeManager = { fake: 'manager' } as unknown as EntityManager;
  let env: Awaited<ReturnType<typeof bothSides>>;
  before(async () => {
    env = await bothSides({ strategy: 'row-lock' }, fakeManager);
  });
  after(async () => {
    await env?.closeAll();
  });

  it('withLock, runLocked and outside any lock: a manager is there exactly where the database-backed service has one', async () => {
    const results: Record<string, unknown> = {};
    for (const side of env.sides) {
      const { locks } = side;
      const has = async () => (locks.manager ? 'has manager' : 'none');
      // What the caller gets: 'has manager', or the class of the error (the messages name each backend's own setup).
      const kind = async (fn: () => Promise<unknown>) => {
        const o = (await outcome(fn)) as { ok?: unknown; error?: { name: string } };
        return o.ok ?? o.error?.name;
      };
      results[side.name] = {
        withLock: await kind(() => locks.withLock('rl-m1', has)),
        withLockRead: await kind(() => locks.withLock('rl-m2', has, { mode: 'read' })),
        withLockMulti: await kind(() => locks.withLock(['rl-m5', 'rl-m6'], has)),
        runLockedNone: await kind(() => locks.runLocked('rl-m3', has, { transaction: 'none' })),
        runLockedFenced: await kind(() => locks.runLocked('rl-m4', has)),
        outside: await kind(has),
      };
    }
    assert.deepEqual(results.memory, results.database, differences(results.memory, results.database).join('\n'));
  });
});
