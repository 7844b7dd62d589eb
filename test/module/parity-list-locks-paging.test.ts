import 'reflect-metadata';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { LockService } from '../../lib/index.js';
import { bothSides } from '../testing/parity-support.js';

/** listLocks pages with a cursor (`next` → `after`): a lock released between two pages must not make a live one vanish from the walk. */
describe('testing module parity: listLocks paging while a lock of an earlier page is released', () => {
  let env: Awaited<ReturnType<typeof bothSides>>;
  before(async () => {
    env = await bothSides({ namespace: 'hp3' });
  });
  after(async () => {
    await env?.closeAll();
  });

  async function scenario(locks: LockService, side: string): Promise<unknown> {
    const handles = [];
    for (const k of ['a', 'b', 'c', 'd']) handles.push(await locks.acquire(`${side}-${k}`));
    const first = await locks.listLocks({ limit: 2 });
    await handles[0]!.release();
    const second = await locks.listLocks({ limit: 2, after: first.next ?? undefined });
    for (const h of handles.slice(1)) await h.release();
    return { first: first.locks.map((l) => l.key.replace(`${side}-`, '')), second: second.locks.map((l) => l.key.replace(`${side}-`, '')) };
  }

  it('same pages', async () => {
    const results: Record<string, unknown> = {};
    for (const side of env.sides) results[side.name] = await scenario(side.locks, side.name);
    assert.deepEqual(results.memory, results.database, JSON.stringify(results));
  });
});
