import 'reflect-metadata';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { LockHandle } from '../../lib/index.js';
import { bothSides, differences, errorView, eventView, outcome } from './parity-support.js';
import { eventually } from '../support/lock-app.js';

/** Shutdown with a held lock, a waiting caller and a running withLock: the same outcomes on both. */
describe('parity: shutdown', () => {
  let env: Awaited<ReturnType<typeof bothSides>>;
  let shared: Record<string, unknown> | undefined;
  before(async () => {
    env = await bothSides({ shutdownTimeoutMs: 200 });
  });
  after(async () => {
    await env?.closeAll();
  });

  it('held, waiting, running, semaphore and reentrant callers at close; calls afterwards', async () => {
    const results: Record<string, unknown> = {};
    for (const side of env.sides) {
      const { locks } = side;
      const from = side.events.length;
      const held = await locks.acquire('sd-held');
      const permit = await locks.acquireSemaphore('sd-sem', 2);
      const waiter = outcome(() => locks.acquire('sd-held', { timeoutMs: 10_000 }));
      const semWaiter = outcome(async () => {
        const other = await locks.acquireSemaphore('sd-sem1', 1);
        return outcome(() => locks.acquireSemaphore('sd-sem1', 1, { timeoutMs: 10_000 })).finally(() => other.release().catch(() => undefined));
      });
      let insideSignal: AbortSignal | undefined;
      const running = outcome(() =>
        locks.withLock('sd-run', async (lock) => {
          insideSignal = lock.signal;
          await new Promise((resolve) => lock.signal.addEventListener('abort', resolve));
          return 'ran to the abort';
        }),
      );
      let fencedSignal: AbortSignal | undefined;
      const fenced = outcome(() =>
        locks.runLocked('sd-fenced', async (lock) => {
          fencedSignal = lock.signal;
          await new Promise((resolve) => lock.signal.addEventListener('abort', resolve));
          return 'fenced ran to the abort';
        }),
      );
      await eventually(() => insideSignal !== undefined && fencedSignal !== undefined && locks.stats().waiting === 2, 5_000, 'callers in place');
      const closing = side.close();
      const r: Record<string, unknown> = {};
      r.waiter = await waiter;
      r.semWaiter = await semWaiter;
      await closing;
      r.running = await running;
      r.fenced = await fenced;
      r.heldSignal = { aborted: held.signal.aborted, reason: errorView(held.signal.reason) };
      r.permitSignal = { aborted: permit.signal.aborted, reason: errorView(permit.signal.reason) };
      r.heldReleased = held.released;
      r.release = await outcome(() => held.release());
      r.releasePermit = await outcome(() => permit.release());
      r.releasedAfterRelease = held.released;
      r.extend = await outcome(() => (held as LockHandle).extend(1_000));
      r.acquireAfter = await outcome(() => locks.acquire('sd-after'));
      r.tryAfter = await outcome(() => locks.tryAcquire('sd-after'));
      r.withAfter = await outcome(() => locks.withLock('sd-after', () => 1));
      r.runAfter = await outcome(() => locks.runLocked('sd-after', () => 1));
      r.inspectAfter = await outcome(() => locks.inspect('sd-after'));
      r.statsAfter = await outcome(async () => locks.stats().held);
      r.managerAfter = await outcome(async () => locks.manager);
      r.events = side.events
        .slice(from)
        .map(eventView)
        .sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b)));
      results[side.name] = r;
    }
    // The loss's wording differs (the database explains it from its log row), and each names its own DataSource.
    const strip = (v: unknown) =>
      JSON.parse(
        JSON.stringify(v, (k, x: unknown) => (k === 'message' || k === 'reason' || k === 'releasedAfterRelease' || k === 'extend' ? undefined : x)),
      );
    shared = results;
    assert.deepEqual(strip(results.memory), strip(results.database), differences(strip(results.memory), strip(results.database)).join('\n'));
  });

  it('a handle the shutdown released stays `released` after its holder calls release() (true before, must not flip back)', () => {
    assert.ok(shared, 'the scenario above ran');
    for (const side of ['database', 'memory'] as const) {
      const r = shared[side] as { heldReleased: boolean; releasedAfterRelease: boolean; release: unknown };
      assert.equal(r.heldReleased, true, `${side}: released after shutdown`);
      assert.equal(r.releasedAfterRelease, true, `${side}: handle.released after release() rejected with ${JSON.stringify(r.release)}`);
    }
  });
});
