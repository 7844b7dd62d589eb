import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { TestDatabase } from '../support/test-database.js';
import { bootLockApp } from '../support/boot-app.js';
import { AddTokenClaims1798156800000, DB_LOCK_MIGRATIONS, DbLockModule } from '../../lib/index.js';
import { mysqlLogOf } from '../support/lock-internals.js';

/**
 * The README on AddTokenClaims: "Locks held meanwhile are untouched. A process only uses the
 * one-INSERT grant if it saw the index at startup; one started before it keeps the old grant, and its
 * grants fail with a typed error after a one-INSERT grant (a duplicate token), never beside a holder".
 * Tokens of a key never go back (operations.md: "tokens jump, never go back").
 *
 * A process started before the migration also keeps running the janitor, and its janitor is the
 * claim-less one: it prunes claim rows without lifting the key row above them, and reaps a key row
 * recording only the (lagging) key row token in the fencing floor.
 */
describe('janitor of a process started before AddTokenClaims', () => {
  let db: TestDatabase;
  const runner = () => ({ query: (sql: string, params?: unknown[]) => db.query(sql, params) }) as never;

  before(async () => {
    db = await TestDatabase.create('dblock', { lockTables: false });
    const all = DB_LOCK_MIGRATIONS as (new () => { up(r: unknown): Promise<void> })[];
    const claimsAt = all.indexOf(AddTokenClaims1798156800000 as never);
    for (const Migration of all.slice(0, claimsAt)) await new Migration().up(runner());
  });
  after(async () => {
    await db?.drop();
  });

  it('tokens handed out by one-INSERT grants are never handed out again after the older process janitor prunes the log', async () => {
    // The older process: started before AddTokenClaims; its janitor keeps no ended log row (retention 0; key rows kept) and runs on demand only.
    const old = await bootLockApp(db.settings, DbLockModule.forRoot({ janitor: { intervalMs: 3_600_000, logRetentionMs: 0, idleKeyMs: Infinity } }));
    try {
      assert.equal(mysqlLogOf(old.locks).schema.claims, false, 'the older process started without the claim index');
      const all = DB_LOCK_MIGRATIONS as (new () => { up(r: unknown): Promise<void> })[];
      const claimsAt = all.indexOf(AddTokenClaims1798156800000 as never);
      for (const Migration of all.slice(claimsAt)) await new Migration().up(runner());

      const tokens: number[] = [];
      const upgraded = await bootLockApp(db.settings, DbLockModule.forRoot({ janitor: false }));
      try {
        assert.equal(mysqlLogOf(upgraded.locks).schema.claims, true, 'the upgraded process sees the claim index');
        for (let i = 0; i < 4; i++) {
          const lock = await upgraded.locks.acquire('mix:k');
          tokens.push(lock.fencingToken);
          await lock.release();
        }
      } finally {
        await upgraded.app.close();
      }
      const [keyRow] = await db.query<{ t: string }[]>(`SELECT fencing_token AS t FROM db_lock WHERE lock_key = 'mix:k'`);
      await new Promise((r) => setTimeout(r, 50));
      const report = await old.locks.runJanitor();
      assert.equal(report.ran, true);

      const restarted = await bootLockApp(db.settings, DbLockModule.forRoot({ janitor: false }));
      try {
        const lock = await restarted.locks.acquire('mix:k');
        const token = lock.fencingToken;
        await lock.release();
        const max = Math.max(...tokens);
        assert.ok(
          token > max,
          `token went back: tokens handed out before ${tokens.join(', ')} (key row was at ${keyRow?.t} before the janitor run: one-INSERT ` +
            `grants left it behind), the older process's janitor then pruned ${report.pruned} rows, ` +
            `and the next grant of the key got token ${token}, not above ${max}`,
        );
      } finally {
        await restarted.app.close();
      }
    } finally {
      await old.app.close();
    }
  });
});
