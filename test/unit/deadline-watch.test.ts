import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { DeadlineWatch } from '../../lib/core/deadline-watch.js';

/** When each deadline expired, relative to its due time (ms; negative: early). */
function recorder(): { expired: Map<string, number>; expireAt: (watch: DeadlineWatch, name: string, inMs: number) => { cancel(): void } } {
  const expired = new Map<string, number>();
  return {
    expired,
    expireAt: (watch, name, inMs) => {
      const at = performance.now() + inMs;
      return watch.watch(at, () => expired.set(name, performance.now() - at));
    },
  };
}

describe('DeadlineWatch', () => {
  it('expires each deadline at its time, never early, whatever order they come in', async () => {
    const watch = new DeadlineWatch();
    const { expired, expireAt } = recorder();
    // Later first, then earlier ones: each earlier deadline must re-arm the one timer.
    expireAt(watch, 'late', 120);
    expireAt(watch, 'early', 20);
    expireAt(watch, 'middle', 60);
    await sleep(200);
    assert.deepEqual([...expired.keys()].sort(), ['early', 'late', 'middle']);
    // Margin: timers fire at the earliest on their due time; 60 ms late tolerates a loaded 2-core host.
    for (const [name, lateBy] of expired) assert.ok(lateBy >= 0 && lateBy < 60, `${name} expired ${lateBy.toFixed(1)} ms after its deadline`);
  });

  it('never expires a cancelled deadline, and the others still expire', async () => {
    const watch = new DeadlineWatch();
    const { expired, expireAt } = recorder();
    const first = expireAt(watch, 'first', 20);
    expireAt(watch, 'second', 40);
    first.cancel();
    await sleep(100);
    assert.deepEqual([...expired.keys()], ['second']);
  });

  it('keeps one timer for deadlines that come and go after the earliest (no re-arm per statement)', async (t) => {
    const watch = new DeadlineWatch();
    const armed = t.mock.method(globalThis, 'setTimeout');
    const base = performance.now();
    watch.watch(base + 50, () => undefined).cancel();
    for (let i = 1; i <= 100; i++) watch.watch(base + 50 + i, () => undefined).cancel();
    assert.equal(armed.mock.callCount(), 1, 'one timer for a hundred later deadlines');
    // Negative control: an earlier deadline does re-arm.
    watch.watch(base + 10, () => undefined).cancel();
    assert.equal(armed.mock.callCount(), 2);
    armed.mock.restore();
    await sleep(70); // the kept timer fires, finds nothing, and lapses
  });
});
