import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { setImmediate as yieldTurn } from 'node:timers/promises';
import { type DbLockModuleOptions, type LockEvent, LockLostError, type LockService, LockTimeoutError, LockUpgradeError } from '../../lib/index.js';
import { eventually } from './lock-app.js';

/** A LockService under test and a peer on the same locks (another app on the database; the same in-memory service). */
export interface GuaranteeTarget {
  readonly locks: LockService;
  readonly peer: LockService;
  /** One try may itself wait up to the deadline (row-lock waits in the server): maxAttempts then bounds tries, not time. */
  readonly triesWait?: boolean;
  /** Readers share the key's current token instead of taking a new one (row-lock: a reader does not bump it). */
  readonly readersShareToken?: boolean;
  /** Why forceRelease cannot see this target's holders, if it cannot (the test is skipped with it). */
  readonly forceReleaseGap?: string;
  close(): Promise<void>;
}

export type GuaranteeTargetFactory = (options: DbLockModuleOptions) => Promise<GuaranteeTarget>;

/** Timer slack and one round trip on a loaded 2-core machine, added to every time bound below. */
const MARGIN_MS = 300;

/**
 * The guarantees a caller can observe inside one process, written once and registered for every
 * LockService that claims them: the database-backed one (per strategy) and the testing module's
 * in-memory one. Observed through the public API only: overlap counters, tokens, errors, signals
 * and events.
 */
export function inProcessGuarantees(title: string, create: GuaranteeTargetFactory): void {
  describe(`in-process guarantees [${title}]`, () => {
    const events: LockEvent[] = [];
    let target: GuaranteeTarget;
    before(async () => {
      target = await create({ janitor: false, onEvent: (event) => events.push(event) });
    });
    after(() => target?.close());

    /** Runs `callers` concurrent holders of `keyOf(i)`; how many were ever inside at once. */
    async function overlap(callers: number, keyOf: (i: number) => string): Promise<number> {
      let inside = 0;
      let most = 0;
      await Promise.all(
        Array.from({ length: callers }, (_, i) =>
          (i % 2 === 0 ? target.locks : target.peer).withLock(keyOf(i), async () => {
            most = Math.max(most, ++inside);
            // Inside for a few turns, and until another holder was seen inside or 50 ms passed: grants
            // on a database answer at different times, and a probe that left at once could miss overlap.
            const entered = performance.now();
            for (let turn = 0; turn < 5 || (most < 2 && performance.now() - entered < 50); turn++) await yieldTurn();
            inside--;
          }),
        ),
      );
      return most;
    }

    it('exclusion: one writer at a time; the probe sees overlap on distinct keys (negative control)', async () => {
      assert.equal(await overlap(8, () => 'excl'), 1);
      assert.ok((await overlap(8, (i) => `excl-${i}`)) > 1, 'the probe must be able to see overlap');
    });

    it('readers share a key; a writer waits for them and a waiting writer holds new readers back', async () => {
      const first = await target.locks.acquire('rw', { mode: 'read' });
      const second = await target.peer.acquire('rw', { mode: 'read', timeoutMs: 0 });
      assert.equal(await target.peer.tryAcquire('rw'), null);
      await second.release();
      const writer = target.peer.acquire('rw', { timeoutMs: 10_000 });
      // Once the writer has been refused it marks the key: a new reader is refused although only readers hold it.
      await eventually(
        async () => {
          const reader = await target.locks.tryAcquire('rw', { mode: 'read' });
          await reader?.release();
          return reader === null;
        },
        5_000,
        'a new reader held back by the waiting writer',
      );
      await first.release();
      const granted = await writer;
      assert.equal(granted.mode, 'write');
      await granted.release();
    });

    it('reentrancy: a key the chain holds costs no new grant; read then write is refused', async () => {
      await target.locks.withLock('re', async (outer) => {
        const inner = await target.locks.acquire('re');
        assert.equal(inner.reentrant, true);
        assert.equal(inner.fencingToken, outer.fencingToken);
        await inner.release();
        assert.equal(outer.signal.aborted, false);
      });
      await assert.rejects(
        target.locks.withLock('up', () => target.locks.acquire('up', { mode: 'write' }), { mode: 'read' }),
        LockUpgradeError,
      );
    });

    it('several keys are taken all or nothing', async () => {
      const b = await target.peer.acquire('mk-b');
      await assert.rejects(target.locks.acquire(['mk-a', 'mk-b'], { timeoutMs: 0 }), LockTimeoutError);
      const a = await target.peer.tryAcquire('mk-a');
      assert.ok(a, "a refused multi-key lock must not leave 'mk-a' held");
      await a.release();
      await b.release();
      const both = await target.locks.acquire(['mk-a', 'mk-b'], { timeoutMs: 0 });
      assert.deepEqual([...both.keys].sort(), ['mk-a', 'mk-b']);
      await both.release();
    });

    it('a timeout ends in LockTimeoutError no earlier than timeoutMs and within it plus the margin; the event says so', async () => {
      const held = await target.peer.acquire('to');
      const started = performance.now();
      const error = await target.locks.acquire('to', { timeoutMs: 150 }).catch((e: unknown) => e);
      const elapsed = performance.now() - started;
      await held.release();
      assert.ok(error instanceof LockTimeoutError);
      assert.ok(elapsed >= 149 && elapsed <= 150 + MARGIN_MS, `waited ${elapsed} ms`);
      assert.ok(events.some((e) => e.type === 'timed-out' && e.keys.includes('to')));
    });

    it("maxAttempts ends the wait after that many tries, long before timeoutMs; onLocked 'skip' skips", async () => {
      const held = await target.peer.acquire('tries');
      const started = performance.now();
      await assert.rejects(target.locks.acquire('tries', { timeoutMs: target.triesWait ? 300 : 60_000, maxAttempts: 2 }), LockTimeoutError);
      if (!target.triesWait) assert.ok(performance.now() - started < 5_000);
      let ran = false;
      const skipped = await target.locks.runLocked('tries', () => (ran = true), { onLocked: 'skip', transaction: 'none' });
      assert.equal(skipped, undefined);
      assert.equal(ran, false);
      assert.ok(events.some((e) => e.type === 'skipped' && e.keys.includes('tries')));
      await held.release();
    });

    it('fencing tokens of a key strictly increase with every grant', async () => {
      const tokens: number[] = [];
      for (let i = 0; i < 6; i++) {
        const lock = await (i % 2 === 0 ? target.locks : target.peer).acquire('tok', { mode: i % 3 === 0 ? 'read' : 'write' });
        tokens.push(lock.fencingToken);
        await lock.release();
      }
      for (let i = 1; i < tokens.length; i++) {
        const reader = i % 3 === 0;
        if (target.readersShareToken && reader) assert.ok(tokens[i]! >= tokens[i - 1]!, `tokens ${tokens.join(', ')}`);
        else assert.ok(tokens[i]! > tokens[i - 1]!, `tokens ${tokens.join(', ')}`);
      }
    });

    it('forceRelease aborts the holder signal, its release reports LockLostError, the key is free; events tell', async (t) => {
      if (target.forceReleaseGap) return t.skip(target.forceReleaseGap);
      const lock = await target.locks.acquire('forced');
      const evicted = await target.locks.forceRelease('forced', 'test eviction');
      assert.equal(evicted.length, 1);
      assert.equal(evicted[0]!.fencingToken, lock.fencingToken);
      assert.equal(lock.signal.aborted, true);
      assert.ok(lock.signal.reason instanceof LockLostError);
      await assert.rejects(lock.release(), LockLostError);
      const next = await target.peer.acquire('forced', { timeoutMs: 0 });
      assert.ok(next.fencingToken > lock.fencingToken);
      await next.release();
      assert.ok(events.some((e) => e.type === 'acquired' && e.keys.includes('forced') && e.fencingToken === lock.fencingToken));
      assert.ok(events.some((e) => e.type === 'lost' && e.keys.includes('forced')));
    });
  });

  describe(`maxHoldMs [${title}]`, () => {
    let target: GuaranteeTarget;
    before(async () => {
      target = await create({ janitor: false, maxHoldMs: 300, leaseMs: 2_000 });
    });
    after(() => target?.close());

    it('a lock held past maxHoldMs is given up: signal aborted with LockLostError, key free again', async () => {
      const lock = await target.locks.acquire('held-long');
      await eventually(() => lock.signal.aborted, 300 + 2 * MARGIN_MS + 1_000, 'the signal to abort after maxHoldMs');
      assert.ok(lock.signal.reason instanceof LockLostError);
      assert.match((lock.signal.reason as LockLostError).reason, /maxHoldMs/);
      const next = await target.peer.acquire('held-long', { timeoutMs: 2_000 });
      await next.release();
      await assert.rejects(lock.release(), LockLostError);
    });
  });
}
