import 'reflect-metadata';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { bothSides, differences, eventView, outcome } from './parity-support.js';

/** Admin calls under a namespace: listLocks pages, inspect, forceRelease of a multi-key holder; same on both. */
describe('parity: admin calls with a namespace', () => {
  let env: Awaited<ReturnType<typeof bothSides>>;
  before(async () => {
    env = await bothSides({ namespace: 'ns1' });
  });
  after(async () => {
    await env?.closeAll();
  });

  it('pages, keys without the namespace, eviction of every key of the acquisition', async () => {
    const results: Record<string, unknown> = {};
    for (const side of env.sides) {
      const { locks } = side;
      const from = side.events.length;
      const multi = await locks.acquire(['adm-b', { key: 'adm-a', mode: 'read' }]);
      const r1 = await locks.acquire('adm-c', { mode: 'read' });
      const r2 = await locks.acquire('adm-c', { mode: 'read' });
      const permit = await locks.acquireSemaphore('adm-s', 4);
      const pages: unknown[] = [];
      let after: string | undefined;
      for (let i = 0; i < 10; i++) {
        const page = await locks.listLocks({ limit: 2, after });
        pages.push(
          page.locks.map((l) => ({ key: l.key, mode: l.mode, token: l.fencingToken, status: l.status, strategy: l.strategy, leaseMs: l.leaseMs })),
        );
        if (page.next === null) break;
        after = page.next;
      }
      const r: Record<string, unknown> = { pages };
      r.inspect = await locks.inspect('adm-a');
      r.inspect = { mode: (r.inspect as { mode: unknown }).mode, holders: (r.inspect as { holders: unknown[] }).holders.length };
      r.evicted = (await locks.forceRelease('adm-a', 'ns parity')).map((h) => ({ mode: h.mode, token: h.fencingToken }));
      r.bFree = await outcome(async () => {
        const b = await locks.tryAcquire('adm-b');
        await b?.release();
        return b?.fencingToken ?? null;
      });
      r.multiSignal = multi.signal.aborted;
      r.multiRelease = await outcome(() => multi.release());
      for (const h of [r1, r2, permit]) await h.release();
      r.empty = (await locks.listLocks()).locks.length;
      r.events = side.events.slice(from).map(eventView);
      results[side.name] = r;
    }
    const strip = (v: unknown) => JSON.parse(JSON.stringify(v, (k, x: unknown) => (k === 'message' || k === 'reason' ? undefined : x)));
    assert.deepEqual(strip(results.memory), strip(results.database), differences(strip(results.memory), strip(results.database)).join('\n'));
  });
});
