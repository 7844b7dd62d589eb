import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { Logger } from '@nestjs/common';
import type { DataSource } from 'typeorm';
import { HeldLock, type HeldLockOwner } from '../../lib/held-lock.js';
import { resolveTargets } from '../../lib/lock-key.js';
import { LockContext } from '../../lib/context/lock-context.js';
import { FencedTransaction } from '../../lib/transaction/fenced-transaction.js';
import { LockLostError } from '../../lib/index.js';

/** The order of what the transaction did, and a fake TypeORM query runner answering the fence. */
function fakes(answers: { flipped: number; live?: number; releaseError?: Error }) {
  const trace: string[] = [];
  const warnings: string[] = [];
  let fencingDuringFence: boolean | undefined;
  const manager = { name: 'manager' };
  let active = false;
  const runner = {
    manager,
    get isTransactionActive() {
      return active;
    },
    async startTransaction(level: string) {
      trace.push(`start ${level}`);
      active = true;
    },
    async query(sql: string, parameters: unknown[], structured?: boolean) {
      fencingDuringFence = lock.fencing;
      if (sql.startsWith('UPDATE')) {
        trace.push(`fence ${String(parameters[0])}`);
        assert.equal(structured, true, 'the fence reads the structured result');
        return { affected: answers.flipped };
      }
      trace.push(`check ${String(parameters[0])}`);
      assert.match(sql, /FOR UPDATE$/);
      return [{ live: String(answers.live ?? 0) }];
    },
    async commitTransaction() {
      trace.push('commit');
      active = false;
    },
    async rollbackTransaction() {
      trace.push('rollback');
      active = false;
    },
    async release() {
      trace.push('release connection');
    },
  };
  const owner: HeldLockOwner = {
    async releaseHeld(_lock, failed) {
      trace.push(failed ? 'release FAILED' : 'release RELEASED');
      if (answers.releaseError) throw answers.releaseError;
    },
    async extendHeld() {},
  };
  const targets = resolveTargets(['a', 'b'], 'write', '');
  const now = performance.now();
  const lock = new HeldLock(
    owner,
    'owner-1',
    targets,
    targets.map((t, i) => ({ id: String(i), storedKey: t.storedKey, fencingToken: 1, expiresAt: new Date(Date.now() + 1000) })),
    1000,
    now,
    now,
    0,
  );
  const settings = {
    dataSource: { createQueryRunner: () => runner } as unknown as DataSource,
    isolationLevel: 'READ COMMITTED' as const,
    logger: { warn: (m: string) => warnings.push(m) } as unknown as Logger,
  };
  const locks = new Map(targets.map((t) => [t.storedKey, lock]));
  return { trace, warnings, lock, settings, locks, manager, fencing: () => fencingDuringFence };
}

describe('FencedTransaction', () => {
  it('runs the method in the transaction, fences every key, commits, then releases', async () => {
    const f = fakes({ flipped: 2 });
    const result = await FencedTransaction.run(f.settings, f.lock, f.locks, () => {
      assert.equal(LockContext.manager(), f.manager, 'the method sees the transaction manager');
      return 42;
    });
    assert.equal(result, 42);
    assert.deepEqual(f.trace, ['start READ COMMITTED', 'fence owner-1', 'commit', 'release connection', 'release RELEASED']);
    assert.equal(f.fencing(), true, 'the watchdog is held off while the fence runs');
    assert.equal(f.lock.fencing, false);
  });

  it('fewer rows flipped and not live: rollback, LockLostError, release FAILED', async () => {
    const f = fakes({ flipped: 1, live: 1 });
    await assert.rejects(FencedTransaction.run(f.settings, f.lock, f.locks, () => 1), LockLostError);
    assert.deepEqual(f.trace, ['start READ COMMITTED', 'fence owner-1', 'check owner-1', 'rollback', 'release FAILED', 'release connection']);
  });

  it('rows already COMPLETED (fenced before) but live: the locking re-check lets it commit', async () => {
    const f = fakes({ flipped: 0, live: 2 });
    assert.equal(await FencedTransaction.run(f.settings, f.lock, f.locks, () => 'ok'), 'ok');
    assert.deepEqual(f.trace, ['start READ COMMITTED', 'fence owner-1', 'check owner-1', 'commit', 'release connection', 'release RELEASED']);
  });

  it('the method throws: rollback, release FAILED, the original error rethrown, no fence', async () => {
    const f = fakes({ flipped: 2 });
    const original = new Error('business');
    await assert.rejects(
      FencedTransaction.run(f.settings, f.lock, f.locks, () => {
        throw original;
      }),
      (e: unknown) => e === original,
    );
    assert.deepEqual(f.trace, ['start READ COMMITTED', 'rollback', 'release FAILED', 'release connection']);
  });

  it('a lock known lost before the fence is never committed on', async () => {
    const f = fakes({ flipped: 2 });
    await assert.rejects(
      FencedTransaction.run(f.settings, f.lock, f.locks, () => {
        f.lock.markLost(new LockLostError('a', 1, 'taken over'));
      }),
      LockLostError,
    );
    assert.deepEqual(f.trace, ['start READ COMMITTED', 'rollback', 'release FAILED', 'release connection']);
  });

  it('a lost lock reported by the release AFTER a fenced commit is a warning, not an error', async () => {
    const f = fakes({ flipped: 2, releaseError: new LockLostError('a', 1, 'taken over after its lease ran out') });
    assert.equal(await FencedTransaction.run(f.settings, f.lock, f.locks, () => 'done'), 'done');
    assert.deepEqual(f.trace, ['start READ COMMITTED', 'fence owner-1', 'commit', 'release connection', 'release RELEASED']);
    assert.equal(f.warnings.length, 1);
    assert.match(f.warnings[0]!, /committed while its lock was held/);
  });
});
