import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { TestDatabase } from '../support/test-database.js';
import { bootLockApp } from '../support/boot-app.js';
import { AddTokenClaims1798156800000, DB_LOCK_MIGRATIONS, DbLockModule } from '../../lib/index.js';
import { mysqlLogOf } from '../support/lock-internals.js';

/**
 * AddTokenClaims upgrades db_lock_log in place (a virtual column and a unique index on it) while
 * locks are held: holders from before keep their locks, tokens continue above every earlier one,
 * and a process started after it grants a key it knows free by one INSERT. It refuses a table it
 * cannot index, and `down` returns to the grant without claims.
 */
describe('the token-claims migration', () => {
  let db: TestDatabase;
  const runner = () => ({ query: (sql: string, params?: unknown[]) => db.query(sql, params) }) as never;
  const claimIndex = async () =>
    Number(
      (
        await db.query<{ n: number }[]>(
          `SELECT COUNT(*) AS n FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'db_lock_log' AND INDEX_NAME = 'uq_db_lock_log_key_claim'`,
        )
      )[0]!.n,
    );

  before(async () => {
    db = await TestDatabase.create('dblock', { lockTables: false });
    const before = (DB_LOCK_MIGRATIONS as (new () => { name?: string; up(r: unknown): Promise<void> })[]).filter(
      (M) => M !== (AddTokenClaims1798156800000 as unknown),
    );
    assert.equal(before.length, DB_LOCK_MIGRATIONS.length - 1);
    for (const Migration of before) await new Migration().up(runner());
  });
  after(async () => {
    await db?.drop();
  });

  it('in place under held locks: they stay held, tokens continue, and a process started after it grants by one INSERT', async () => {
    const old = await bootLockApp(db.settings, DbLockModule.forRoot({ janitor: false }));
    try {
      assert.equal(mysqlLogOf(old.locks).schema.claims, false, 'no claim index yet');
      const held = await old.locks.acquire('up:held');
      const ended = await old.locks.acquire('up:ended');
      await ended.release();
      await new AddTokenClaims1798156800000().up(runner());
      await new AddTokenClaims1798156800000().up(runner()); // idempotent: nothing to do the second time
      assert.equal(await claimIndex(), 2, 'the unique index on (lock_key, token_claim)');
      const [column] = await db.query<{ extra: string }[]>(
        `SELECT EXTRA AS extra FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'db_lock_log' AND COLUMN_NAME = 'token_claim'`,
      );
      assert.match(column!.extra, /VIRTUAL/, 'a virtual column: metadata only, no table rebuild');

      const upgraded = await bootLockApp(db.settings, DbLockModule.forRoot({ janitor: false }));
      try {
        assert.equal(mysqlLogOf(upgraded.locks).schema.claims, true);
        assert.equal(await upgraded.locks.tryAcquire('up:held'), null, 'a lock held across the upgrade is still held');
        const next = await upgraded.locks.acquire('up:ended');
        assert.equal(next.fencingToken, ended.fencingToken + 1);
        await next.release();
        // Now known free: the next grant is one INSERT (no key row touched), and its token follows.
        const [before] = await db.query<{ last_granted_at: string }[]>(
          `SELECT DATE_FORMAT(last_granted_at, '%H:%i:%s.%f') AS last_granted_at FROM db_lock WHERE lock_key = 'up:ended'`,
        );
        const again = await upgraded.locks.acquire('up:ended');
        assert.equal(again.fencingToken, next.fencingToken + 1);
        const [after] = await db.query<{ last_granted_at: string }[]>(
          `SELECT DATE_FORMAT(last_granted_at, '%H:%i:%s.%f') AS last_granted_at FROM db_lock WHERE lock_key = 'up:ended'`,
        );
        assert.equal(after!.last_granted_at, before!.last_granted_at, 'the one-INSERT grant left the key row alone');
        await again.release();
        await held.release();
        const taken = await upgraded.locks.acquire('up:held', { timeoutMs: 5_000 });
        assert.equal(taken.fencingToken, held.fencingToken + 1);
        await taken.release();
      } finally {
        await upgraded.app.close();
      }
    } finally {
      await old.app.close();
    }
  });

  it('down removes the claims; a process then grants as before', async () => {
    await new AddTokenClaims1798156800000().down(runner());
    assert.equal(await claimIndex(), 0);
    const { app, locks } = await bootLockApp(db.settings, DbLockModule.forRoot({ janitor: false }));
    try {
      assert.equal(mysqlLogOf(locks).schema.claims, false);
      const [row] = await db.query<{ t: string }[]>(
        `SELECT fencing_token AS t FROM db_lock_log WHERE lock_key = 'up:ended' ORDER BY id DESC LIMIT 1`,
      );
      const lock = await locks.acquire('up:ended');
      assert.equal(lock.fencingToken, Number(row!.t) + 1, 'the key row was lifted above the claims by the grants since');
      await lock.release();
    } finally {
      await app.close();
    }
  });

  it('refuses a log whose lease rows share a key and token (no version writes that), and changes nothing', async () => {
    for (let i = 0; i < 2; i++)
      await db.query(
        `INSERT INTO db_lock_log (lock_key, mode, owner, holder, strategy, fencing_token, status, lease_ms, acquired_at, expires_at, ended_at) ` +
          `VALUES ('dup', 'write', UUID(), 'test', 'lease', 7, 'RELEASED', 1000, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))`,
      );
    await assert.rejects(new AddTokenClaims1798156800000().up(runner()), /sharing a key's fencing token \(0x647570:7\)/);
    assert.equal(await claimIndex(), 0);
    const columns = await db.query<unknown[]>(
      `SELECT 1 FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'db_lock_log' AND COLUMN_NAME = 'token_claim'`,
    );
    assert.equal(columns.length, 0, 'no column added either');
  });
});
