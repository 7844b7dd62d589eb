import 'reflect-metadata';
import { after, before, beforeEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { DbLockModule, DbLockOptionsError, DbLockError, type LockService } from '../../lib/index.js';
import { bootLockApp } from '../support/boot-app.js';
import { TestDatabase } from '../support/test-database.js';

/**
 * Module options whose documented behaviour needs a database: renewIntervalMs against per-call
 * leases that do not fit it, forRootAsync factories that throw, and per-call/semaphore bad input
 * refused with no round trip.
 */
describe('options that need a database', () => {
  let db: TestDatabase;
  before(async () => {
    db = await TestDatabase.create();
  });
  after(async () => {
    await db?.drop();
  });
  beforeEach(async () => {
    for (const table of ['db_lock_log', 'db_lock', 'db_lock_process', 'db_lock_row_lock']) await db.query(`DELETE FROM ${table}`);
  });

  it('renewIntervalMs longer than a per-call lease allows: that lock is renewed every third of its own lease and kept', async () => {
    const { app, locks } = await bootLockApp(db.settings, DbLockModule.forRoot({ renewIntervalMs: 1_000, leaseMs: 30_000, janitor: false }), {
      logger: false,
    });
    try {
      for (const leaseMs of [300, 2_000]) {
        const lock = await locks.acquire(`renew:${leaseMs}`, { leaseMs });
        await sleep(leaseMs * 1.6);
        assert.equal(lock.signal.aborted, false, `a ${leaseMs} ms lock with renewIntervalMs 1000 must be renewed every third of its lease, not lost`);
        await lock.release();
      }
    } finally {
      await app.close();
    }
  });

  it('a forRootAsync factory that throws fails the bootstrap with its own error; nothing is written', async () => {
    const boom = new Error('config service down');
    await assert.rejects(
      bootLockApp(
        db.settings,
        DbLockModule.forRootAsync({
          useFactory: () => {
            throw boom;
          },
        }),
        { logger: false },
      ),
      (error: unknown) => error === boom || (error as Error).message.includes('config service down'),
    );
    await assert.rejects(
      bootLockApp(db.settings, DbLockModule.forRootAsync({ useFactory: async () => ({ dataSourceName: 'other', leaseMs: 50 }) as never }), {
        logger: false,
      }),
      (error: unknown) => {
        assert.ok(error instanceof DbLockOptionsError, String(error));
        assert.match(error.problems.join('\n'), /unknown option 'dataSourceName'/);
        assert.match(error.problems.join('\n'), /leaseMs/);
        return true;
      },
    );
    const [r] = await db.query<{ n: number }[]>(
      'SELECT (SELECT COUNT(*) FROM db_lock) + (SELECT COUNT(*) FROM db_lock_log) + (SELECT COUNT(*) FROM db_lock_process) AS n',
    );
    assert.equal(Number(r!.n), 0, 'nothing written');
  });

  it('bad per-call and semaphore arguments are refused with typed errors and no round trip', async () => {
    const { app, locks } = await bootLockApp(db.settings, DbLockModule.forRoot({ janitor: false }), { logger: false });
    try {
      const l: LockService = locks;
      await l.inspect('warm'); // opens the pool
      const before = l.stats().roundTrips;
      const bad: [string, () => Promise<unknown>][] = [
        ['limit 0', () => l.acquireSemaphore('s', 0)],
        ['limit 1001', () => l.acquireSemaphore('s', 1001)],
        ['limit 1.5', () => l.withSemaphore('s', 1.5, () => 1)],
        ['limit NaN', () => l.runSemaphore('s', NaN, () => 1)],
        ['limit Infinity', () => l.acquireSemaphore('s', Infinity)],
        ['limit string', () => l.acquireSemaphore('s', '3' as never)],
        ['semaphore row-lock', () => l.acquireSemaphore('s', 2, { strategy: 'row-lock' as never })],
        ['semaphore mode', () => l.acquireSemaphore('s', 2, { mode: 'read' } as never)],
        ['semaphore unknown', () => l.withSemaphore('s', 2, () => 1, { onLocked: 'skip' } as never)],
        ['semaphore lease 99', () => l.acquireSemaphore('s', 2, { leaseMs: 99 })],
        ['semaphore two keys', () => l.acquireSemaphore(['a', 'b'] as never, 2)],
        ['lease Infinity', () => l.acquire('k', { leaseMs: Infinity })],
        ['timeout -1', () => l.acquire('k', { timeoutMs: -1 })],
        ['timeout 2^31', () => l.acquire('k', { timeoutMs: 2 ** 31 })],
        ['maxAttempts 0.5', () => l.acquire('k', { maxAttempts: 0.5 })],
        ['name empty', () => l.acquire('k', { name: '' })],
        ['tryAcquire Infinity', () => l.tryAcquire('k', { timeoutMs: Infinity } as never)],
        ['runLocked iso+none', () => l.runLocked('k', () => 1, { transaction: 'none', isolationLevel: 'SERIALIZABLE' })],
        ['runLocked row-lock skip bad', () => l.runLocked('k', () => 1, { strategy: 'row-lock', onLocked: 'ignore' as never })],
        ['listLocks limit 0', () => l.listLocks({ limit: 0 })],
        ['listLocks after x', () => l.listLocks({ after: 'x' })],
        ['forceRelease no reason', () => l.forceRelease('k', '')],
      ];
      const problems: string[] = [];
      for (const [label, call] of bad) {
        try {
          await call();
          problems.push(`${label}: accepted`);
        } catch (error) {
          if (!(error instanceof DbLockError)) problems.push(`${label}: ${String(error)}`);
        }
      }
      assert.deepEqual(problems, [], 'every bad call must be refused with a DbLockError');
      assert.equal(l.stats().roundTrips, before, 'no round trip was sent for refused calls');
      const [r] = await db.query<{ n: number }[]>('SELECT (SELECT COUNT(*) FROM db_lock) + (SELECT COUNT(*) FROM db_lock_log) AS n');
      assert.equal(Number(r!.n), 0, 'nothing written');
    } finally {
      await app.close();
    }
  });
});
