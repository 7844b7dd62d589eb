import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import mysql from 'mysql2';
import { TestDatabase } from '../support/test-database.js';
import { createLockApp, eventually } from '../support/lock-app.js';
import type { LockHandle, LockService } from '../../lib/index.js';
import { mysqlLogOf, stall } from '../support/lock-internals.js';
import { contractSuite } from '../support/contract-targets.js';

/**
 * mysql2 sets CLIENT_FOUND_ROWS by default (affectedRows = matched rows). The protocol must not
 * depend on it: the same grant / busy / release / takeover / stale-release round gives the same
 * outcomes and the same log rows with the flag on (default) and off (`flags: ['-FOUND_ROWS']`).
 */
const poolOf = (locks: LockService) => ({
  query: async <T>(sql: string): Promise<T> => mysqlLogOf(locks).pool.query<T>(sql, { purpose: 'admin' }),
});

async function outcome(promise: Promise<unknown>): Promise<string> {
  try {
    const value = await promise;
    if (value === null) return 'null';
    if (value === undefined) return 'ok';
    return `token ${(value as LockHandle).fencingToken}`;
  } catch (error) {
    return (error as Error).name;
  }
}

contractSuite('found-rows', 'CLIENT_FOUND_ROWS on and off', (target) => {
  let db: TestDatabase;
  const apps: INestApplicationContext[] = [];
  const variants: Record<'on' | 'off', LockService> = {} as never;
  before(async () => {
    db = await TestDatabase.create();
    const on = await createLockApp(db.settings, target.options());
    const off = await createLockApp(db.settings, target.options(), { mysqlExtra: { flags: ['-FOUND_ROWS'] } });
    apps.push(on.app, off.app);
    variants.on = on.locks;
    variants.off = off.locks;
  });
  after(async () => {
    for (const app of apps) await app.close();
    await db?.drop();
  });

  it('the flag really reaches the library pool', async () => {
    await db.query('INSERT INTO db_lock (lock_key) VALUES (?)', [Buffer.from('probe')]);
    // An UPDATE that matches one row and changes nothing: 1 with FOUND_ROWS, 0 without.
    const probe = mysql.format('UPDATE db_lock SET fencing_token = fencing_token WHERE lock_key = ?', [Buffer.from('probe')]);
    assert.equal((await poolOf(variants.on).query<{ affectedRows: number }>(probe)).affectedRows, 1);
    assert.equal((await poolOf(variants.off).query<{ affectedRows: number }>(probe)).affectedRows, 0);
  });

  async function round(locks: LockService, key: string): Promise<{ outcomes: string[]; statuses: string[] }> {
    const outcomes: string[] = [];
    const first = await locks.acquire(key, { timeoutMs: 0 });
    outcomes.push(`grant ${first.fencingToken}`);
    outcomes.push(`busy: ${await outcome(locks.tryAcquire(key))}`);
    outcomes.push(`extend: ${await outcome(first.extend(5_000))}`);
    outcomes.push(`release: ${await outcome(first.release())}`);
    outcomes.push(`release twice: ${await outcome(first.release())}`);

    const stale = await locks.acquire(key, { leaseMs: 200, timeoutMs: 0 });
    outcomes.push(`grant ${stale.fencingToken}`);
    await stall(locks, stale);
    await eventually(async () => (await locks.inspect(key)).holders.length === 0, 5_000, 'the lease to run out');
    const reclaimedBefore = locks.stats().reclaimed;
    const fresh = await locks.acquire(key, { timeoutMs: 0 });
    outcomes.push(`takeover ${fresh.fencingToken}, reclaimed ${locks.stats().reclaimed - reclaimedBefore}`);
    outcomes.push(`stale extend: ${await outcome(stale.extend())}`);
    outcomes.push(`stale release: ${await outcome(stale.release())}`);
    outcomes.push(`holder after stale calls: ${(await locks.inspect(key)).holders.map((h) => h.fencingToken).join(',')}`);
    outcomes.push(`release: ${await outcome(fresh.release())}`);
    outcomes.push(`free: ${await outcome(locks.tryAcquire(key).then((l) => l?.release().then(() => l)))}`);
    const statuses = (await db.logRows(key)).map((r) => String(r.status));
    return { outcomes, statuses };
  }

  it('a grant / busy / release / takeover / stale-release round has identical outcomes', async () => {
    const on = await round(variants.on, 'found-rows-on');
    const off = await round(variants.off, 'found-rows-off');
    assert.deepEqual(on.outcomes, [
      'grant 1',
      'busy: null',
      'extend: ok',
      'release: ok',
      'release twice: ok',
      'grant 2',
      'takeover 3, reclaimed 1',
      'stale extend: LockLostError',
      'stale release: LockLostError',
      'holder after stale calls: 3',
      'release: ok',
      'free: token 4',
    ]);
    assert.deepEqual(off.outcomes, on.outcomes);
    assert.deepEqual(on.statuses, ['RELEASED', 'EXPIRED', 'RELEASED', 'RELEASED']);
    assert.deepEqual(off.statuses, on.statuses);
  });
});
