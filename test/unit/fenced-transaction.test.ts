import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { Logger } from '@nestjs/common';
import { HeldLock, type HeldLockHost, type LockTransaction } from '../../lib/core/held-lock.js';
import { resolveTargets } from '../../lib/core/lock-key.js';
import { LockContext } from '../../lib/core/lock-context.js';
import { FencedTransaction, type FenceHost } from '../../lib/core/fenced-transaction.js';
import { LockLostError } from '../../lib/index.js';
import type { FenceStore } from '../../lib/store/lock-store.js';

/** What the transaction did, in order, with a fake store answering the fence statements and COMMIT. */
function fakes(answers: { ended?: number; kept?: number; commitError?: unknown; endedAlone?: boolean }) {
  const trace: string[] = [];
  const warnings: string[] = [];
  const manager = { name: 'manager' };
  let active = true; // already started: the strategy opened it
  let fencesSeen = -1;
  const runner = {
    manager,
    get isTransactionActive() {
      return active;
    },
    async rollbackTransaction() {
      trace.push('rollback');
      active = false;
    },
  };
  /** The store's fence writes and COMMIT, answered as the test says. */
  const store: FenceStore = {
    begin: async () => undefined,
    async commit() {
      if (answers.commitError) throw answers.commitError;
      trace.push('commit');
      active = false;
    },
    async endInCommit(_runner, rowIds) {
      fencesSeen = own.fencesInProgress;
      trace.push(`end ${rowIds.join(',')}`);
      return answers.ended ?? 2;
    },
    async endAndCommit(_runner, rowId, owner) {
      fencesSeen = alone.fencesInProgress;
      trace.push(`end ${rowId} of ${owner} and commit`);
      if (answers.commitError) throw answers.commitError;
      if (answers.endedAlone === false) return false;
      active = false;
      return true;
    },
    async fenceKept(_runner, rowIds) {
      fencesSeen = own.fencesInProgress;
      trace.push(`fence kept ${rowIds.join(',')}`);
      return answers.kept ?? 1;
    },
    rollsBackTransaction: () => false,
    cutSession: () => trace.push('cut'),
  };
  const transaction: LockTransaction = {
    runner: runner as never,
    finish: async (committed) => {
      trace.push(`finish ${committed ? 'committed' : 'rolled back'}`);
    },
  };
  const heldHost: HeldLockHost = { release: async () => undefined, extend: async () => undefined };
  const host: FenceHost = {
    endedInCommit: (lock) => trace.push(`ended in commit ${lock.keys.join('+')}`),
    release: async (lock, failed) => {
      trace.push(`release ${lock.keys.join('+')} ${failed ? 'FAILED' : 'RELEASED'}`);
    },
  };
  const make = (keys: string[], firstId: number): HeldLock => {
    const targets = resolveTargets(keys, 'write', '');
    const now = performance.now();
    return new HeldLock(
      heldHost,
      'lease',
      `acq-${keys.join('+')}`,
      targets,
      targets.map((t, i) => ({ id: String(firstId + i), storedKey: t.storedKey, fencingToken: 1, expiresAt: new Date(Date.now() + 1000) })),
      1000,
      now,
      now,
      0,
    );
  };
  const own = make(['a', 'b'], 1);
  const outer = make(['c'], 10);
  const alone = make(['d'], 20);
  const byKey = new Map([...own.targets.map((t) => [t.storedKey, own] as const), ...outer.targets.map((t) => [t.storedKey, outer] as const)]);
  const logger = { warn: (m: string) => warnings.push(m) } as unknown as Logger;
  const run = <T>(fn: () => T, locks = { own: [own], kept: [outer], byKey }) =>
    FencedTransaction.run({ host, logger, store }, transaction, own, locks, fn);
  const runAlone = <T>(fn: () => T) =>
    FencedTransaction.run({ host, logger, store }, transaction, alone, { own: [alone], kept: [], byKey: new Map([['d', alone]]) }, fn);
  return { trace, warnings, own, outer, alone, manager, host, run, runAlone, fencesDuringFence: () => fencesSeen };
}

describe('FencedTransaction', () => {
  it('runs the method in the transaction, ends its own lock and fences the outer one in it, commits', async () => {
    const f = fakes({});
    const result = await f.run(() => {
      assert.equal(LockContext.manager(f.host), f.manager, 'the method sees the transaction manager');
      return 42;
    });
    assert.equal(result, 42);
    assert.deepEqual(f.trace, ['end 1,2', 'fence kept 10', 'commit', 'finish committed', 'ended in commit a+b']);
    assert.equal(f.fencesDuringFence(), 1, 'the watchdog is held off while the fence runs');
    assert.equal(f.own.fencesInProgress, 0);
  });

  it('fewer own rows ended than held: rollback, LockLostError, the lock ends FAILED', async () => {
    const f = fakes({ ended: 1 });
    await assert.rejects(
      f.run(() => 1),
      LockLostError,
    );
    assert.deepEqual(f.trace, ['end 1,2', 'rollback', 'finish rolled back', 'release a+b FAILED']);
  });

  it("the outer lock's row no longer live: rollback and LockLostError", async () => {
    const f = fakes({ kept: 0 });
    await assert.rejects(
      f.run(() => 1),
      LockLostError,
    );
    assert.deepEqual(f.trace, ['end 1,2', 'fence kept 10', 'rollback', 'finish rolled back', 'release a+b FAILED']);
  });

  it('the method throws: rollback, the lock ends FAILED, the original error rethrown, no fence', async () => {
    const f = fakes({});
    const original = new Error('business');
    await assert.rejects(
      f.run(() => {
        throw original;
      }),
      (e: unknown) => e === original,
    );
    assert.deepEqual(f.trace, ['rollback', 'finish rolled back', 'release a+b FAILED']);
  });

  it('a lock known lost before the fence is never committed on', async () => {
    const f = fakes({});
    await assert.rejects(
      f.run(() => {
        f.own.markLost(new LockLostError('a', 1, 'taken over'));
      }),
      LockLostError,
    );
    assert.deepEqual(f.trace, ['rollback', 'finish rolled back', 'release a+b FAILED']);
  });

  it('a certification failure at COMMIT (errno 1213 on a cluster) is LockLostError with the driver error as cause', async () => {
    const certification = Object.assign(new Error('Deadlock found when trying to get lock'), { errno: 1213, code: 'ER_LOCK_DEADLOCK' });
    const f = fakes({ commitError: certification });
    await assert.rejects(
      f.run(() => 1),
      (e: unknown) => e instanceof LockLostError && e.cause === certification,
    );
  });

  it('a connection lost at COMMIT is a typed error naming the unknown outcome, with the driver error as cause', async () => {
    const reset = Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET', fatal: true });
    const f = fakes({ commitError: reset });
    await assert.rejects(
      f.run(() => 1),
      (e: unknown) => (e as Error).name === 'DbLockConnectionError' && (e as Error).cause === reset,
    );
  });

  it('one lock of one row ending alone: its end and the COMMIT go as one call', async () => {
    const f = fakes({});
    assert.equal(await f.runAlone(() => 7), 7);
    assert.deepEqual(f.trace, ['end 20 of acq-d and commit', 'finish committed', 'ended in commit d']);
    assert.equal(f.fencesDuringFence(), 1, 'the watchdog is held off while it runs');
  });

  it('one lock of one row, no longer live at that call: rollback, LockLostError, the lock ends FAILED', async () => {
    const f = fakes({ endedAlone: false });
    await assert.rejects(
      f.runAlone(() => 7),
      LockLostError,
    );
    assert.deepEqual(f.trace, ['end 20 of acq-d and commit', 'rollback', 'finish rolled back', 'release d FAILED']);
  });

  it('one lock of one row, its call refused by a conflicting write (1213): LockLostError with the driver error as cause', async () => {
    const deadlock = Object.assign(new Error('Deadlock found when trying to get lock'), { errno: 1213, code: 'ER_LOCK_DEADLOCK' });
    const f = fakes({ commitError: deadlock });
    await assert.rejects(
      f.runAlone(() => 7),
      (e: unknown) => e instanceof LockLostError && e.cause === deadlock,
    );
  });
});
