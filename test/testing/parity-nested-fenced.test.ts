import 'reflect-metadata';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { bothSides, differences, eventView, outcome } from './parity-support.js';

/**
 * A fenced call inside a fenced call joins the outer one: its lock ends with the outer commit (held
 * until then), or FAILED with the outer call's failure. The testing module must behave the same.
 */
describe('parity: nested fenced calls join the outer one', () => {
  let env: Awaited<ReturnType<typeof bothSides>>;
  before(async () => {
    env = await bothSides();
  });
  after(async () => {
    await env?.closeAll();
  });

  it('the inner lock stays held until the outer call ends, and ends with it (committed or failed): same state and events', async () => {
    const results: Record<string, unknown> = {};
    for (const side of env.sides) {
      const { locks } = side;
      const r: Record<string, unknown> = {};
      let from = side.events.length;
      r.committed = await outcome(() =>
        locks.runLocked('nf-outer', async () => {
          await locks.runLocked('nf-inner', async () => 'inner');
          return { heldAfterInner: locks.stats().held };
        }),
      );
      r.committedEvents = side.events.slice(from).map(eventView);
      r.heldAfter = locks.stats().held;
      from = side.events.length;
      r.failed = await outcome(() =>
        locks.runLocked('nf-outer2', async () => {
          await locks.runLocked('nf-inner2', async () => 'inner');
          throw new Error('the outer work failed after the inner call returned');
        }),
      );
      r.failedEvents = side.events.slice(from).map(eventView);
      r.heldAfterFailure = locks.stats().held;
      results[side.name] = r;
    }
    assert.deepEqual(results.memory, results.database, differences(results.memory, results.database).join('\n'));
  });
});
