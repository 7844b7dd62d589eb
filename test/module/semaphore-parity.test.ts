import 'reflect-metadata';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import type { LockService } from '../../lib/index.js';
import { eventually } from '../support/lock-app.js';
import { bothSides, differences, eventView, outcome, type Side } from '../testing/parity-support.js';

/**
 * The testing module's semaphores against the database's, scenario by scenario:
 * outcomes (errors with their typed fields), events, and stats counters must be the same.
 */
describe('semaphore parity, in-memory vs database', () => {
  let env: Awaited<ReturnType<typeof bothSides>>;
  before(async () => {
    env = await bothSides({ leaseMs: 5_000 });
  });
  after(async () => {
    await env?.closeAll();
  });

  type Scenario = (locks: LockService, key: string) => Promise<unknown>;

  async function compare(name: string, scenario: Scenario): Promise<void> {
    const results: Record<string, unknown> = {};
    for (const side of env.sides as Side[]) {
      const eventsBefore = side.events.length;
      const stats0 = side.locks.stats();
      const value = await scenario(side.locks, name);
      await sleep(50);
      const stats1 = side.locks.stats();
      const counters: Record<string, number> = {};
      for (const c of ['acquired', 'reentrant', 'released', 'timedOut', 'skipped', 'lost', 'forceReleased'] as const)
        counters[c] = stats1[c] - stats0[c];
      results[side.name] = {
        value,
        counters,
        held: stats1.held,
        events: side.events
          .slice(eventsBefore)
          .filter((e) => e.type !== 'renewed')
          .map((e) => {
            const v = eventView(e);
            return { ...v, keys: (v.keys as string[]).map((k) => k.replace(`-${side.name}`, '')), fencingToken: undefined };
          }),
      };
    }
    const diff = differences(results.memory, results.database);
    assert.deepEqual(diff, [], `${name}: in-memory and database differ:\n${diff.join('\n')}`);
  }

  it('limit mismatch, lock vs permits, skip, maxAttempts', async () => {
    await compare('mix', async (locks, key) => {
      const out: unknown[] = [];
      const p1 = await locks.acquireSemaphore(key, 2);
      const p2 = await locks.acquireSemaphore(key, 2);
      out.push(await outcome(() => locks.acquireSemaphore(key, 3, { timeoutMs: 0 })));
      out.push(await outcome(() => locks.acquireSemaphore(key, 2, { timeoutMs: 0 })));
      out.push(await outcome(() => locks.acquireSemaphore(key, 2, { timeoutMs: 60_000, maxAttempts: 2 })));
      out.push(await outcome(() => locks.runSemaphore(key, 2, () => 'ran', { onLocked: 'skip', transaction: 'none' })));
      out.push(await outcome(() => locks.runSemaphore(key, 5, () => 'ran', { onLocked: 'skip', transaction: 'none' })));
      out.push(await outcome(() => locks.acquire(key, { timeoutMs: 0 })));
      out.push(await outcome(() => locks.acquire(key, { mode: 'read', timeoutMs: 0 })));
      out.push(await outcome(() => locks.withSemaphore(key, 2, (p) => p.limit)));
      await p1.release();
      out.push(await outcome(() => locks.acquireSemaphore(key, 3, { timeoutMs: 0 }).then((p) => p.release().then(() => 'granted'))));
      await p2.release();
      out.push(await outcome(() => locks.acquireSemaphore(key, 3, { timeoutMs: 0 }).then((p) => p.release().then(() => p.limit))));
      const w = await locks.acquire(key);
      out.push(await outcome(() => locks.acquireSemaphore(key, 7, { timeoutMs: 0 })));
      out.push(await outcome(() => locks.runSemaphore(key, 7, () => 'ran', { onLocked: 'skip', transaction: 'none' })));
      await w.release();
      return out;
    });
  });

  it('chain: re-entry, lock inside permit, permit inside lock, other limit inside permit', async () => {
    await compare('chain', async (locks, key) => {
      const out: unknown[] = [];
      out.push(
        await outcome(() =>
          locks.withSemaphore(key, 2, async (outer) => {
            const inner: unknown[] = [];
            inner.push(
              await outcome(() =>
                locks.withSemaphore(key, 2, (p) => ({ reentrant: p.reentrant, limit: p.limit, same: p.fencingToken === outer.fencingToken })),
              ),
            );
            inner.push(await outcome(() => locks.withSemaphore(key, 3, () => 1)));
            inner.push(await outcome(() => locks.withLock(key, () => 1)));
            inner.push(await outcome(() => locks.withLock(key, () => 1, { mode: 'read' })));
            inner.push(await outcome(() => locks.acquireSemaphore(key, 2).then((p) => p.release().then(() => p.reentrant))));
            return inner;
          }),
        ),
      );
      out.push(await outcome(() => locks.withLock(key, () => locks.withSemaphore(key, 2, () => 1))));
      out.push(await outcome(() => locks.withLock(key, () => locks.withSemaphore(key, 2, () => 1), { mode: 'read' })));
      return out;
    });
  });

  it('forceRelease of permits, then a waiter gets in', async () => {
    await compare('force', async (locks, key) => {
      const out: unknown[] = [];
      const p = await locks.acquireSemaphore(key, 1);
      const waiter = locks.acquireSemaphore(key, 1, { timeoutMs: 8_000 }).then(
        (h) => h,
        (e: unknown) => e,
      );
      await eventually(() => locks.stats().waiting === 1, 5_000, 'waiting');
      const evicted = await locks.forceRelease(key, 'probe');
      out.push(evicted.map((h) => h.mode));
      const got = await waiter;
      out.push((got as { limit?: number }).limit ?? String(got));
      await eventually(() => p.signal.aborted, 10_000, 'evicted signal');
      out.push(await outcome(() => p.extend()));
      out.push(await outcome(() => p.release()));
      if (typeof (got as { release?: unknown }).release === 'function') await (got as { release(): Promise<void> }).release();
      return out;
    });
  });
});
