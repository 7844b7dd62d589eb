import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import net from 'node:net';
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

  it('an answer that arrived while the process was stalled past the deadline counts: it is read before the deadline expires', async () => {
    // An echo server in a process of its own: it answers while this process's event loop is blocked.
    const server = spawn(process.execPath, [
      '-e',
      "const s = require('net').createServer((c) => c.on('data', (d) => c.write(d))).listen(0, '127.0.0.1', () => console.log(s.address().port))",
    ]);
    try {
      const [portLine] = (await once(server.stdout, 'data')) as [Buffer];
      const socket = net.connect(Number(portLine.toString().trim()), '127.0.0.1');
      await once(socket, 'connect');
      const watch = new DeadlineWatch();
      const outcome = await new Promise<string>((resolve) => {
        let settled = false;
        const settle = (how: string) => {
          if (settled) return;
          settled = true;
          resolve(how);
        };
        const watched = watch.watch(performance.now() + 20, () => settle('expired'));
        socket.once('data', () => {
          watched.cancel();
          settle('answered');
        });
        socket.write('ping');
        // A stall: the loop blocked 200 ms (10x the deadline) while the answer lands in the socket.
        const until = performance.now() + 200;
        while (performance.now() < until);
      });
      socket.destroy();
      assert.equal(outcome, 'answered');
      // Negative control: with no answer at all, the same deadline does expire.
      const silent = await new Promise<string>((resolve) => {
        watch.watch(performance.now() + 20, () => resolve('expired'));
        const until = performance.now() + 50;
        while (performance.now() < until);
      });
      assert.equal(silent, 'expired');
    } finally {
      server.kill();
    }
  });
});
