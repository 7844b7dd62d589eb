import 'reflect-metadata';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { LockHandle, LockService } from '../../lib/index.js';
import { bothSides, differences, errorView, eventView, outcome, type Side } from './parity-support.js';

/** The same calls against the database-backed LockService and the in-memory one: the same outcomes. */
describe('parity: in-memory LockService vs the database one, call by call', () => {
  let env: Awaited<ReturnType<typeof bothSides>>;
  before(async () => {
    env = await bothSides();
  });
  after(async () => {
    await env?.closeAll();
  });

  const handleView = (h: LockHandle | null) =>
    h === null ? null : { keys: h.keys, mode: h.mode, modes: h.modes, fencingTokens: h.fencingTokens, reentrant: h.reentrant, released: h.released };

  function parity(title: string, scenario: (locks: LockService, side: Side) => Promise<unknown>): void {
    it(title, async () => {
      const results: Record<string, unknown> = {};
      for (const side of env.sides) {
        const from = side.events.length;
        const value = await scenario(side.locks, side);
        results[side.name] = { value, events: side.events.slice(from).map(eventView) };
      }
      // Wording only: memory has no transaction to roll back.
      const text = (v: unknown) => JSON.parse(JSON.stringify(v).replaceAll(' and was rolled back', ''));
      results.memory = text(results.memory);
      results.database = text(results.database);
      assert.deepEqual(results.memory, results.database, differences(results.memory, results.database).join('\n'));
    });
  }

  parity('bad keys', async (locks) => ({
    empty: await outcome(() => locks.acquire('')),
    long: await outcome(() => locks.acquire('x'.repeat(192))),
    nul: await outcome(async () => {
      const h = await locks.acquire('a\u0000b');
      await h.release();
      return handleView(h);
    }),
    none: await outcome(() => locks.acquire([])),
    surrogate: await outcome(() => locks.acquire('a\ud800')),
    notString: await outcome(() => locks.acquire(5 as unknown as string)),
    inspectEmpty: await outcome(() => locks.inspect('')),
    inspectArray: await outcome(() => locks.inspect(['a'] as unknown as string)),
    forceEmpty: await outcome(() => locks.forceRelease('', 'why')),
    forceNoReason: await outcome(() => locks.forceRelease('k', '')),
  }));

  parity('bad options', async (locks) => ({
    negative: await outcome(() => locks.acquire('bo', { timeoutMs: -1 })),
    nan: await outcome(() => locks.acquire('bo', { timeoutMs: NaN })),
    fraction: await outcome(() => locks.acquire('bo', { timeoutMs: 1.5 })),
    lease: await outcome(() => locks.acquire('bo', { leaseMs: 50 })),
    attempts: await outcome(() => locks.acquire('bo', { maxAttempts: 0 })),
    mode: await outcome(() => locks.acquire('bo', { mode: 'x' as 'read' })),
    tryTimeout: await outcome(() => locks.tryAcquire('bo', { timeoutMs: 5 } as object)),
    noFn: await outcome(() => locks.withLock('bo', null as unknown as () => void)),
    semZero: await outcome(() => locks.acquireSemaphore('bs', 0)),
    semFraction: await outcome(() => locks.acquireSemaphore('bs', 1.5)),
    semHuge: await outcome(() => locks.acquireSemaphore('bs', 1001)),
    semMode: await outcome(() => locks.acquireSemaphore('bs', 2, { mode: 'read' } as object)),
    semRowLock: await outcome(() => locks.acquireSemaphore('bs', 2, { strategy: 'row-lock' } as object)),
    listZero: await outcome(() => locks.listLocks({ limit: 0 })),
    listAfter: await outcome(async () => (await locks.listLocks({ after: 'abc' })).locks.length),
    listAfterNeg: await outcome(async () => (await locks.listLocks({ after: '-1' })).locks.length),
    runLockedBad: await outcome(() => locks.runLocked('bo', async () => 1, { transaction: 'nope' } as object)),
  }));

  parity('timeoutMs 0 on a held key: one try, LockTimeoutError; tryAcquire null', async (locks) => {
    const held = await locks.acquire('t0');
    const r = {
      zero: await outcome(() => locks.acquire('t0', { timeoutMs: 0 })),
      attempts: await outcome(() => locks.acquire('t0', { timeoutMs: 5_000, maxAttempts: 1 })),
      tryA: await outcome(async () => handleView(await locks.tryAcquire('t0'))),
      readZero: await outcome(() => locks.acquire('t0', { timeoutMs: 0, mode: 'read' })),
      multiZero: await outcome(() => locks.acquire(['t0-free', 't0'], { timeoutMs: 0 })),
    };
    await held.release();
    return { ...r, freeAfterwards: handleView(await locks.tryAcquire('t0-free')) };
  });

  parity('reentrancy: read in write, write in read, mixed duplicates', async (locks) => ({
    readInWrite: await outcome(() =>
      locks.withLock('re1', async () => {
        const inner = await locks.acquire('re1', { mode: 'read' });
        const v = handleView(inner);
        await inner.release();
        return v;
      }),
    ),
    writeInRead: await outcome(() => locks.withLock('re2', () => locks.acquire('re2'), { mode: 'read' })),
    writeInReadMulti: await outcome(() => locks.withLock('re3', () => locks.acquire(['re3b', 're3']), { mode: 'read' })),
    mixedDup: await outcome(async () => {
      const h = await locks.acquire([
        { key: 'dup', mode: 'read' },
        { key: 'dup', mode: 'write' },
      ]);
      const v = handleView(h);
      await h.release();
      return v;
    }),
    sameDup: await outcome(async () => {
      const h = await locks.acquire(['d2', 'd1', 'd2']);
      const v = handleView(h);
      await h.release();
      return v;
    }),
    permitInLock: await outcome(() => locks.withLock('pl', () => locks.acquireSemaphore('pl', 2))),
    lockInPermit: await outcome(() => locks.withSemaphore('lp', 2, () => locks.acquire('lp'))),
    reenterPermitOtherLimit: await outcome(() => locks.withSemaphore('lp2', 2, () => locks.acquireSemaphore('lp2', 3))),
    reenterPermitSameLimit: await outcome(() => locks.withSemaphore('lp3', 2, async () => handleView(await locks.acquireSemaphore('lp3', 2)))),
  }));

  parity('release twice, extend after release, bad extend', async (locks) => {
    const h = await locks.acquire('rel');
    const r: Record<string, unknown> = {};
    r.badExtend = await outcome(() => h.extend(10));
    r.infExtend = await outcome(() => h.extend(Infinity));
    r.extend = await outcome(() => h.extend(5_000));
    r.first = await outcome(() => h.release());
    r.second = await outcome(() => h.release());
    r.extendAfter = await outcome(() => h.extend(5_000));
    r.released = h.released;
    r.signalAborted = h.signal.aborted;
    return r;
  });

  parity('force-released lock: signal, release, extend, fenced call', async (locks) => {
    const h = await locks.acquire('fr', { mode: 'read' });
    const h2 = await locks.acquire('fr', { mode: 'read' });
    const evicted = await locks.forceRelease('fr', 'parity');
    const r: Record<string, unknown> = {
      evicted: evicted.map((e) => ({ mode: e.mode, fencingToken: e.fencingToken })),
      signal: h.signal.aborted,
      reason: errorView(h.signal.reason),
      extend: await outcome(() => h.extend()),
      release: await outcome(() => h.release()),
      release2: await outcome(() => h2.release()),
      evictFree: await locks.forceRelease('fr', 'parity'),
    };
    r.fenced = await outcome(() =>
      locks.runLocked('fr2', async () => {
        await locks.forceRelease('fr2', 'mid-work');
        return 1;
      }),
    );
    r.fencedThrows = await outcome(() =>
      locks.runLocked('fr3', async () => {
        await locks.forceRelease('fr3', 'mid-work');
        throw new Error('boom');
      }),
    );
    r.none = await outcome(() =>
      locks.runLocked(
        'fr4',
        async () => {
          await locks.forceRelease('fr4', 'mid-work');
          return 1;
        },
        { transaction: 'none' },
      ),
    );
    return r;
  });

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
