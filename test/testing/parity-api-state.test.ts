import 'reflect-metadata';
import { describe } from 'node:test';
import { handleView, outcome, parityTests } from './parity-support.js';

/** What each LockService reports of its locks (inspect, tokens, semaphores, events, stats): the same on both sides. */
describe('parity: in-memory LockService vs the database one, what they report', () => {
  const parity = parityTests();

  parity('inspect: free, never used, read holders, write holder, permit', async (locks) => {
    const view = async (key: string) => {
      const i = await locks.inspect(key);
      return {
        key: i.key,
        mode: i.mode,
        fencingToken: i.fencingToken,
        holders: i.holders.map((h) => ({ mode: h.mode, fencingToken: h.fencingToken, strategy: h.strategy })),
        expires: i.expiresAt === null ? null : typeof i.expiresAt,
      };
    };
    const r: Record<string, unknown> = { never: await view('ins-never') };
    const a = await locks.acquire('ins', { mode: 'read' });
    const b = await locks.acquire('ins', { mode: 'read' });
    r.reads = await view('ins');
    await a.release();
    await b.release();
    r.freed = await view('ins');
    const w = await locks.acquire(['ins', 'ins-2']);
    r.write = await view('ins');
    r.write2 = await view('ins-2');
    await w.release();
    const p = await locks.acquireSemaphore('ins', 3);
    r.permit = await view('ins');
    await p.release();
    return r;
  });

  parity('semaphores: limit, other limit, tokens, a lock waits for permits', async (locks) => {
    const p1 = await locks.acquireSemaphore('sem', 2);
    const p2 = await locks.acquireSemaphore('sem', 2);
    const r: Record<string, unknown> = {
      tokens: [p1.fencingToken, p2.fencingToken],
      limit: [p1.limit, p2.limit],
      third: await outcome(() => locks.acquireSemaphore('sem', 2, { timeoutMs: 0 })),
      other: await outcome(() => locks.acquireSemaphore('sem', 3, { timeoutMs: 0 })),
      otherWaiting: await outcome(() => locks.acquireSemaphore('sem', 3, { timeoutMs: 100 })),
      lock: await outcome(() => locks.acquire('sem', { timeoutMs: 0 })),
      readLock: await outcome(() => locks.acquire('sem', { timeoutMs: 0, mode: 'read' })),
    };
    await p1.release();
    await p2.release();
    const p3 = await locks.acquireSemaphore('sem', 3);
    r.adopted = [p3.fencingToken, p3.limit];
    await p3.release();
    const w = await locks.acquire('sem');
    r.lockAfter = w.fencingToken;
    r.permitWhileLocked = await outcome(() => locks.acquireSemaphore('sem', 1, { timeoutMs: 0 }));
    await w.release();
    return r;
  });

  parity('tokens strictly increase per key, readers and multi-key included', async (locks) => {
    const seen: unknown[] = [];
    for (let i = 0; i < 3; i++) {
      const h = await locks.acquire(['tok-a', 'tok-b'], { mode: i === 1 ? 'read' : 'write' });
      seen.push(h.fencingTokens);
      await h.release();
    }
    const r1 = await locks.acquire('tok-b', { mode: 'read' });
    const r2 = await locks.acquire('tok-b', { mode: 'read' });
    seen.push([r1.fencingToken, r2.fencingToken]);
    await r1.release();
    await r2.release();
    seen.push(await locks.withLock('tok-a', (l) => l.fencingToken));
    seen.push(await locks.runLocked('tok-a', (l) => l.fencingToken, { transaction: 'none' }));
    seen.push(await outcome(() => locks.runLocked('tok-a', () => Promise.reject(new Error('x')))));
    seen.push((await locks.inspect('tok-a')).fencingToken);
    return seen;
  });

  parity('withLock failing, runLocked skip, timed out: events and stats deltas', async (locks) => {
    const before = locks.stats();
    const r: Record<string, unknown> = {};
    r.fails = await outcome(() => locks.withLock('ev', () => Promise.reject(new Error('boom'))));
    const held = await locks.acquire('ev');
    r.skip = await outcome(() => locks.runLocked('ev', () => 1, { onLocked: 'skip' }));
    r.skipNone = await outcome(() => locks.runLocked('ev', () => 1, { onLocked: 'skip', transaction: 'none', timeoutMs: 30 }));
    r.timeout = await outcome(() => locks.acquire('ev', { timeoutMs: 30 }));
    r.tryNull = await outcome(async () => handleView(await locks.tryAcquire('ev')));
    r.reentrant = await outcome(() => locks.withLock('ev2', () => locks.withLock('ev2', () => 'in')));
    await held.release();
    const after = locks.stats();
    const keys = ['acquired', 'reentrant', 'released', 'timedOut', 'skipped', 'lost', 'reclaimed', 'forceReleased', 'held', 'waiting'] as const;
    r.stats = Object.fromEntries(keys.map((k) => [k, (after[k] as number) - (k === 'held' || k === 'waiting' ? 0 : (before[k] as number))]));
    r.statKeys = Object.keys(after).sort();
    return r;
  });
});
