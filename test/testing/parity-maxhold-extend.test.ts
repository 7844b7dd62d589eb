import 'reflect-metadata';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { bothSides, eventView } from './parity-support.js';

/**
 * maxHoldMs gives up a lock held longer than it (README: "signals (aborted by forceRelease,
 * maxHoldMs and shutdown)"); a lock released in time is over: no 'lost' event, no `stats().lost`,
 * its handle's signal never aborts. The database-backed service keeps that after `extend()`.
 */
describe('parity: maxHoldMs after extend() and release', () => {
  const MAX_HOLD_MS = 300;
  let env: Awaited<ReturnType<typeof bothSides>>;
  before(async () => {
    env = await bothSides({ maxHoldMs: MAX_HOLD_MS });
  });
  after(async () => {
    await env?.closeAll();
  });

  it('a lock extended, then released well within maxHoldMs, is never reported lost afterwards (same on both)', async () => {
    const seen: Record<string, unknown> = {};
    for (const side of env.sides) {
      const lostBefore = side.locks.stats().lost;
      const from = side.events.length;
      const handle = await side.locks.acquire('extended-then-released');
      await handle.extend(5_000);
      await handle.release();
      // Margin: maxHoldMs (300 ms) + 300 ms, well past the moment a maxHoldMs timer armed at the grant would fire.
      await sleep(MAX_HOLD_MS * 2);
      seen[side.name] = {
        signalAborted: handle.signal.aborted,
        lostCounted: side.locks.stats().lost - lostBefore,
        held: side.locks.stats().held,
        events: side.events.slice(from).map((e) => eventView(e).type),
      };
    }
    assert.deepEqual(seen.database, { signalAborted: false, lostCounted: 0, held: 0, events: ['acquired', 'released'] }, JSON.stringify(seen));
    assert.deepEqual(seen.memory, seen.database, `memory ${JSON.stringify(seen.memory)} vs database ${JSON.stringify(seen.database)}`);
  });
});
