import 'reflect-metadata';
import { describe } from 'node:test';
import { errorView, handleView, outcome, parityTests } from './parity-support.js';

/** The same calls against the database-backed LockService and the in-memory one: the same outcomes. */
describe('parity: in-memory LockService vs the database one, call by call', () => {
  const parity = parityTests();

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
});
