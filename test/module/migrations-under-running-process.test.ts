/**
 * Upgrading under a running process (README "Migrations and upgrades"): a process started after
 * AddRowLockFastPath but before the routines, AddTokenClaims and DropLogGrantTimeIndex holds locks
 * (lease and row-lock) while those migrations run. "Locks held meanwhile are untouched"; "a process
 * started before them keeps the separate round trips until it restarts"; after a one-INSERT grant by
 * an upgraded process, the older one's grants "fail with a typed error ... (a duplicate token), never
 * beside a holder". Tokens never go back.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { TestDatabase } from '../support/test-database.js';
import { bootLockApp } from '../support/boot-app.js';
import { AddCommitRoutines1796947200000, DB_LOCK_MIGRATIONS, DbLockError, DbLockModule } from '../../lib/index.js';
import { mysqlLogOf } from '../support/lock-internals.js';

describe('migrations 5-8 under a running older process', () => {
  let db: TestDatabase;
  const runner = () => ({ query: (sql: string, params?: unknown[]) => db.query(sql, params) }) as never;
  const all = DB_LOCK_MIGRATIONS as (new () => { up(r: unknown): Promise<void> })[];
  const at = all.indexOf(AddCommitRoutines1796947200000 as never);
  before(async () => {
    db = await TestDatabase.create('dblock', { lockTables: false });
    for (const Migration of all.slice(0, at)) await new Migration().up(runner());
  });
  after(async () => {
    await db?.drop();
  });

  it('held locks stay held through the upgrade; the older process keeps working, typed, and tokens never go back', async () => {
    const old = await bootLockApp(db.settings, DbLockModule.forRoot({ janitor: false, leaseMs: 4_000 }));
    try {
      assert.equal(mysqlLogOf(old.locks).schema.claims, false);
      const lease = await old.locks.acquire('up:lease');
      const rowLock = await old.locks.acquire('up:rl', { strategy: 'row-lock' });
      const reader = await old.locks.acquire('up:read', { mode: 'read' });
      for (const Migration of all.slice(at)) await new Migration().up(runner());

      const fresh = await bootLockApp(db.settings, DbLockModule.forRoot({ janitor: false, leaseMs: 4_000 }));
      const problems: string[] = [];
      const tokens: Record<string, number[]> = {
        'up:lease': [lease.fencingToken],
        'up:rl': [rowLock.fencingToken],
        'up:read': [reader.fencingToken],
      };
      try {
        assert.equal(mysqlLogOf(fresh.locks).schema.claims, true);
        // Held across the upgrade (longer than the lease: renewals keep them).
        await new Promise((r) => setTimeout(r, 5_000));
        for (const key of ['up:lease', 'up:rl', 'up:read']) {
          const other = await fresh.locks.tryAcquire(key, key === 'up:rl' ? { strategy: 'row-lock' } : {});
          if (other) {
            problems.push(`${key} granted to the upgraded process while the older one holds it (token ${other.fencingToken})`);
            await other.release();
          }
        }
        for (const h of [lease, rowLock, reader]) if (h.signal.aborted) problems.push(`a held lock lost its signal: ${String(h.signal.reason)}`);
        await lease.release();
        await rowLock.release();
        await reader.release();

        // The upgraded process grants by one INSERT (key row left behind), then the older process asks.
        for (const key of ['up:lease', 'up:read']) {
          for (let i = 0; i < 3; i++) {
            const l = await fresh.locks.acquire(key, key === 'up:read' ? { mode: 'read' } : {});
            tokens[key]!.push(l.fencingToken);
            await l.release();
          }
          for (let i = 0; i < 2; i++) {
            try {
              const l = await old.locks.acquire(key, { timeoutMs: 2_000, ...(key === 'up:read' ? { mode: 'read' as const } : {}) });
              tokens[key]!.push(l.fencingToken);
              await l.release();
            } catch (e) {
              if (!(e instanceof DbLockError))
                problems.push(`${key}: the older process got an untyped error: ${(e as Error).name}: ${(e as Error).message}`);
            }
          }
          const l = await fresh.locks.acquire(key, key === 'up:read' ? { mode: 'read' } : {});
          tokens[key]!.push(l.fencingToken);
          await l.release();
        }
        const rl = await old.locks.acquire('up:rl', { strategy: 'row-lock' });
        tokens['up:rl']!.push(rl.fencingToken);
        await rl.release();
        const rl2 = await fresh.locks.acquire('up:rl', { strategy: 'row-lock' });
        tokens['up:rl']!.push(rl2.fencingToken);
        await rl2.release();
        for (const [key, list] of Object.entries(tokens))
          for (let i = 1; i < list.length; i++) if (!(list[i]! > list[i - 1]!)) problems.push(`${key}: tokens not increasing: ${list.join(', ')}`);
      } finally {
        await fresh.app.close();
      }
      assert.deepEqual(problems, []);
    } finally {
      await old.app.close();
    }
  });
});
