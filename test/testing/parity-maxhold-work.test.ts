import 'reflect-metadata';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { bothSides, differences, errorView, eventView, outcome } from './parity-support.js';

/** maxHoldMs ending a hold while work runs: what withLock, runLocked (fenced / none) and a bare handle report, on both. */
describe('parity: maxHoldMs while holding', () => {
  const MAX_HOLD_MS = 200;
  let env: Awaited<ReturnType<typeof bothSides>>;
  before(async () => {
    env = await bothSides({ maxHoldMs: MAX_HOLD_MS });
  });
  after(async () => {
    await env?.closeAll();
  });

  const untilAborted = (signal: AbortSignal) =>
    new Promise<void>((resolve) => (signal.aborted ? resolve() : signal.addEventListener('abort', () => resolve())));

  it('the same error classes, fields, events and key state (wording aside)', async () => {
    const results: Record<string, unknown> = {};
    for (const side of env.sides) {
      const { locks } = side;
      const from = side.events.length;
      const r: Record<string, unknown> = {};
      r.withLock = await outcome(() => locks.withLock('mw1', (l) => untilAborted(l.signal).then(() => 'done')));
      r.fenced = await outcome(() => locks.runLocked('mw2', (l) => untilAborted(l.signal).then(() => 'done')));
      r.fencedThrows = await outcome(() =>
        locks.runLocked('mw3', (l) =>
          untilAborted(l.signal).then(() => {
            throw new Error('work failed after the loss');
          }),
        ),
      );
      r.none = await outcome(() => locks.runLocked('mw4', (l) => untilAborted(l.signal).then(() => 'done'), { transaction: 'none' }));
      const h = await locks.acquire('mw5');
      await untilAborted(h.signal);
      r.bare = { reason: errorView(h.signal.reason), released: h.released };
      r.freeAgain = await outcome(async () => {
        const again = await locks.acquire('mw5', { timeoutMs: 2_000 });
        const token = again.fencingToken;
        await again.release();
        return token;
      });
      r.release = await outcome(() => h.release());
      r.extend = await outcome(() => h.extend());
      r.stats = { lost: locks.stats().lost, held: locks.stats().held };
      r.events = side.events.slice(from).map(eventView);
      results[side.name] = r;
    }
    // The loss's wording differs (the database explains it from the log row); class, key, token, events and state must not.
    const strip = (v: unknown) => JSON.parse(JSON.stringify(v, (k, x: unknown) => (k === 'message' || k === 'reason' ? undefined : x)));
    results.memory = strip(results.memory);
    results.database = strip(results.database);
    assert.deepEqual(results.memory, results.database, differences(results.memory, results.database).join('\n'));
  });
});
