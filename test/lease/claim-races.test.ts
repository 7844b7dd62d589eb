import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import mysql from 'mysql2/promise';
import { TestDatabase } from '../support/test-database.js';
import { contractSuite } from '../support/contract-targets.js';
import type { LockTarget } from '../../lib/core/lock-key.js';
import { leanGrantPlan, type GrantInput } from '../../lib/store/mysql/grant.sql.js';
import { semaphoreGrantPlan } from '../../lib/store/mysql/semaphore-grant.sql.js';
import { fastSingleKeyGrantPlan } from '../../lib/store/mysql/fast-grant.sql.js';
import { claimTokens, leaseHoldersCheck, leaseHoldersOf } from '../../lib/store/mysql/row-lock.sql.js';

/**
 * Where tokens are claimed, a process that knows a key free at T grants it by one INSERT claiming
 * T + 1, without the key row every other grant locks. So every other grant must be refuted by that
 * claim, or refute it, whatever the interleaving. The interleavings that let two holders in while
 * the claim model was built are played here statement by statement on real connections, with the
 * library's own statements: a full grant that decided before the claim, and a row-lock take whose
 * claim was skipped while a holder was live and who saw that holder let go before its count.
 */
contractSuite('lease-mechanics', 'one-INSERT grants against the other grants, statement by statement', () => {
  let db: TestDatabase;
  let q: mysql.Connection;
  let p: mysql.Connection;

  const targetOf = (key: string, semaphoreLimit?: number): LockTarget => ({
    key,
    storedKey: key,
    bytes: Buffer.from(key),
    mode: 'write',
    ...(semaphoreLimit === undefined ? {} : { semaphoreLimit }),
  });
  const inputOf = (targets: LockTarget[], acquisitionId: string): GrantInput => ({
    acquisitionId,
    holder: 'test:1',
    processId: '0',
    strategy: 'lease',
    targets,
    leaseMs: 60_000,
    waitedMs: 0,
    writerWaitMarkMs: 0,
    writerPreference: true,
    claims: true,
  });
  /** The key rows, and the ended hold of ours at `token` that makes us know `key` free. */
  const keysWithOurEndedHold = async (key: string, token: number, others: string[] = []) => {
    for (const k of [key, ...others]) await db.query('INSERT INTO db_lock (lock_key, fencing_token) VALUES (?, ?)', [Buffer.from(k), token]);
    await db.query(
      `INSERT INTO db_lock_log (lock_key, mode, owner, holder, strategy, fencing_token, status, lease_ms, acquired_at, expires_at, ended_at) ` +
        `VALUES (?, 'write', 'ours-before', 'test:1', 'lease', ?, 'RELEASED', 60000, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))`,
      [Buffer.from(key), token],
    );
  };
  /** Our one-INSERT grant of `key`, known free at `freeAt`: its token, or the driver's errno. */
  const oneInsertGrant = async (key: string, freeAt: number, acquisitionId: string): Promise<number | { errno: number }> => {
    const plan = fastSingleKeyGrantPlan(inputOf([targetOf(key)], acquisitionId), () => Date.now(), freeAt);
    assert.equal(plan.statements.length, 1, 'the one-INSERT grant');
    try {
      const [result] = await p.query(plan.statements[0]!);
      return plan.parse([result]).granted ? freeAt + 1 : -1;
    } catch (error) {
      return { errno: (error as { errno: number }).errno };
    }
  };
  const liveOwners = async (key: string) =>
    (
      await db.query<{ owner: string }[]>(`SELECT owner FROM db_lock_log WHERE lock_key = ? AND status IN ('ACQUIRED', 'COMPLETED') ORDER BY id`, [
        Buffer.from(key),
      ])
    ).map((r) => r.owner);
  /** Sends `statements` one by one on `conn` from `from`, up to and including the first that matches `until`. */
  const sendUntil = async (conn: mysql.Connection, statements: readonly string[], results: unknown[], until?: RegExp) => {
    while (results.length < statements.length) {
      const sql = statements[results.length]!;
      results.push((await conn.query(sql))[0]);
      if (until?.test(sql)) return;
    }
  };

  before(async () => {
    db = await TestDatabase.create();
    q = await db.session();
    p = await db.session();
  });
  after(async () => {
    await db?.drop();
  });

  it('a several-key grant that decided before a one-INSERT grant took one of its keys is refused, not granted beside it', async () => {
    await keysWithOurEndedHold('race:A', 1, ['race:B']);
    const plan = leanGrantPlan(inputOf([targetOf('race:A'), targetOf('race:B')], 'theirs'));
    const results: unknown[] = [];
    await sendUntil(q, plan.statements, results, /INTO @dbl_live/); // locked the key rows, counted no live holder
    assert.equal(await oneInsertGrant('race:A', 1, 'ours'), 2, 'our one-INSERT grant got in after their decision');
    await sendUntil(q, plan.statements, results);
    assert.equal(plan.parse(results).granted, false, 'their grant decided again in the view of its token, and saw ours');
    assert.deepEqual(await liveOwners('race:A'), ['ours']);
    assert.deepEqual(await liveOwners('race:B'), [], 'all or nothing');
  });

  it('a semaphore permit that decided before a one-INSERT lock grant is refused, not granted beside the lock', async () => {
    await keysWithOurEndedHold('race:S', 1);
    const plan = semaphoreGrantPlan(inputOf([targetOf('race:S', 2)], 'permit'), 2, false);
    const results: unknown[] = [];
    await sendUntil(q, plan.statements, results, /INTO @dbl_live, @dbl_locked/);
    assert.equal(await oneInsertGrant('race:S', 1, 'ours'), 2);
    await sendUntil(q, plan.statements, results);
    assert.equal(plan.parse(results).granted, false);
    assert.deepEqual(await liveOwners('race:S'), ['ours']);
  });

  it('a row-lock take claims its token before it counts lease holders: our one-INSERT grant of that token is a duplicate', async () => {
    await keysWithOurEndedHold('race:R1', 1);
    await q.query('START TRANSACTION');
    try {
      await q.query('SELECT * FROM db_lock WHERE lock_key = ? FOR UPDATE', [Buffer.from('race:R1')]);
      const check = leaseHoldersCheck([targetOf('race:R1')], 'row', claimTokens([targetOf('race:R1')], 'row', 'test:2')).split(';\n');
      const results: unknown[] = [];
      await sendUntil(p, check, results);
      const found = leaseHoldersOf(results, true);
      assert.equal(found.live, 0);
      assert.equal(found.claimed?.get('race:R1'), 2, 'the take claimed the next token');
      assert.deepEqual(await oneInsertGrant('race:R1', 1, 'ours'), { errno: 1062 }, 'our one-INSERT grant of that token is refused');
    } finally {
      await q.query('ROLLBACK');
    }
  });

  it('a row-lock take that skipped its claim while a lease holder was live, and saw it let go before its count, does not take the key', async () => {
    await keysWithOurEndedHold('race:R2', 1);
    // Our hold at 2, live; the row-lock take locks the key row, then checks on another connection.
    assert.equal(await oneInsertGrant('race:R2', 1, 'ours'), 2);
    await q.query('START TRANSACTION');
    try {
      await q.query('SELECT * FROM db_lock WHERE lock_key = ? FOR UPDATE', [Buffer.from('race:R2')]);
      const check = leaseHoldersCheck([targetOf('race:R2')], 'row', claimTokens([targetOf('race:R2')], 'row', 'test:2')).split(';\n');
      assert.equal(check.length, 4, 'end expired holders, claim, read the claim of each key and whether it needed one, count live holders');
      const pool = await mysql.createConnection(db.settings);
      try {
        const results: unknown[] = [];
        await sendUntil(pool, check, results, /^INSERT INTO db_lock_log/);
        assert.equal((results[1] as { affectedRows: number }).affectedRows, 0, 'no claim while our hold is live');
        // We let go in between, and know the key free at 2.
        await db.query("UPDATE db_lock_log SET status = 'RELEASED', ended_at = UTC_TIMESTAMP(6) WHERE owner = 'ours'");
        await sendUntil(pool, check, results);
        assert.equal(Number((results[3] as { live: number }[])[0]!.live), 0, 'the count alone sees no live holder');
        assert.ok(leaseHoldersOf(results, true).live > 0, 'the key left unclaimed counts as held: the take is refused');
      } finally {
        await pool.end();
      }
      // Why it must be refused: nothing refutes our one-INSERT grant of the next token now.
      assert.equal(await oneInsertGrant('race:R2', 2, 'ours-again'), 3);
    } finally {
      await q.query('ROLLBACK');
    }
  });
});
