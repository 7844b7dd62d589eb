import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import type mysql from 'mysql2/promise';
import { TestDatabase } from '../support/test-database.js';
import { contractSuite } from '../support/contract-targets.js';
import { afterBellClaimPlan } from '../../lib/store/mysql/fast-grant.sql.js';
import type { GrantInput } from '../../lib/store/mysql/grant.sql.js';

/**
 * A writer woken by the key's doorbell grants with one INSERT that claims the key's next token, but
 * only while the key's newest claim is an ended exclusive lease hold (nobody can hold the key then).
 * Every other newest claim must refuse it with nothing written, whoever holds or last held the key:
 * played here with the library's own statement on a real connection, one state of the key at a time.
 */
contractSuite('lease-mechanics', 'the one-INSERT grant after a doorbell wait', () => {
  let db: TestDatabase;
  let p: mysql.Connection;
  let q: mysql.Connection;
  const BELL = 'dbl:test-after-bell';

  const inputOf = (key: string, acquisitionId: string, doorbell?: string): GrantInput => ({
    acquisitionId,
    holder: 'test:1',
    processId: '0',
    strategy: 'lease',
    targets: [{ key, storedKey: key, bytes: Buffer.from(key), mode: 'write' }],
    leaseMs: 60_000,
    waitedMs: 0,
    writerWaitMarkMs: 0,
    writerPreference: true,
    claims: true,
    doorbell,
  });
  const keyRow = (key: string, token: number) => db.query('INSERT INTO db_lock (lock_key, fencing_token) VALUES (?, ?)', [Buffer.from(key), token]);
  /** A log row of the key: its mode, strategy, status and token say what kind of claim it is. */
  const logRow = (key: string, row: { token: number; status: string; mode?: string; strategy?: string; owner?: string }) =>
    db.query(
      'INSERT INTO db_lock_log (lock_key, mode, owner, holder, strategy, fencing_token, status, lease_ms, acquired_at, expires_at) ' +
        'VALUES (?, ?, ?, ?, ?, ?, ?, 60000, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL 60 SECOND)',
      [Buffer.from(key), row.mode ?? 'write', row.owner ?? 'before', 'test:0', row.strategy ?? 'lease', row.token, row.status],
    );
  /** The grant on `conn`: the token it was granted, or the driver's errno. */
  const grant = async (conn: mysql.Connection, key: string, acquisitionId: string, doorbell?: string): Promise<number | { errno: number }> => {
    const plan = afterBellClaimPlan(inputOf(key, acquisitionId, doorbell), Date.now);
    assert.equal(plan.statements.length, 1, 'one INSERT');
    try {
      const [inserted] = await conn.query(plan.statements[0]!);
      const [read] = await conn.query(`SELECT ${plan.readBack}`);
      const outcome = plan.parse([inserted, read]);
      assert.ok(outcome.granted);
      return outcome.rows[0]!.fencingToken;
    } catch (error) {
      const errno = (error as { errno?: number }).errno;
      if (errno === undefined) throw error;
      return { errno };
    }
  };
  const rowsOf = async (key: string) =>
    (
      await db.query<{ owner: string; fencing_token: string; status: string }[]>(
        'SELECT owner, fencing_token, status FROM db_lock_log WHERE lock_key = ? ORDER BY id',
        [Buffer.from(key)],
      )
    ).map((r) => `${r.owner}:${r.fencing_token}:${r.status}`);

  before(async () => {
    db = await TestDatabase.create();
    p = await db.session();
    q = await db.session();
  });
  after(async () => {
    await db?.drop();
  });

  it('the newest claim an ended exclusive lease hold: granted, one above that claim and the key row', async () => {
    await keyRow('bell:ended', 3);
    await logRow('bell:ended', { token: 4, status: 'EXPIRED' });
    await logRow('bell:ended', { token: 5, status: 'RELEASED' });
    assert.equal(await grant(p, 'bell:ended', 'ours'), 6);
    await keyRow('bell:row-ahead', 9);
    await logRow('bell:row-ahead', { token: 5, status: 'RELEASED' });
    assert.equal(await grant(p, 'bell:row-ahead', 'ours'), 10, 'above the key row when it is ahead of the claims');
    assert.deepEqual(await rowsOf('bell:row-ahead'), ['before:5:RELEASED', 'ours:10:ACQUIRED']);
  });

  it('the newest claim anything else: refused (NULL token, 1048), nothing written', async () => {
    const cases: [string, Parameters<typeof logRow>[1]][] = [
      ['bell:live', { token: 5, status: 'ACQUIRED' }],
      ['bell:completed', { token: 5, status: 'COMPLETED' }],
      ['bell:reader', { token: 5, status: 'RELEASED', mode: 'read' }],
      ['bell:permit', { token: 5, status: 'RELEASED', mode: 'permit' }],
      ['bell:row-lock', { token: 5, status: 'CLAIMED', strategy: 'row-lock' }],
    ];
    for (const [key, newest] of cases) {
      await keyRow(key, 5);
      await logRow(key, { token: 4, status: 'RELEASED' });
      await logRow(key, newest);
      const before = await rowsOf(key);
      assert.deepEqual(await grant(p, key, 'ours'), { errno: 1048 }, key);
      assert.deepEqual(await rowsOf(key), before, `${key}: nothing written`);
    }
  });

  it('no claim, or no key row: refused', async () => {
    await keyRow('bell:no-claim', 7);
    assert.deepEqual(await grant(p, 'bell:no-claim', 'ours'), { errno: 1048 });
    await logRow('bell:no-key-row', { token: 5, status: 'RELEASED' });
    assert.deepEqual(await grant(p, 'bell:no-key-row', 'ours'), { errno: 1048 });
    assert.deepEqual(await rowsOf('bell:no-claim'), []);
  });

  it("another session holds the key's doorbell: refused; the session that holds it is granted", async () => {
    await keyRow('bell:turn', 1);
    await logRow('bell:turn', { token: 1, status: 'RELEASED' });
    await q.query('SELECT GET_LOCK(?, 0)', [BELL]);
    try {
      assert.deepEqual(await grant(p, 'bell:turn', 'queued-behind', BELL), { errno: 1048 });
      assert.equal(await grant(q, 'bell:turn', 'bell-holder', BELL), 2);
    } finally {
      await q.query('SELECT RELEASE_LOCK(?)', [BELL]);
    }
  });

  it('two grants at once: the second, waiting on the first, is refused once the first commits', async () => {
    await keyRow('bell:race', 1);
    await logRow('bell:race', { token: 1, status: 'RELEASED' });
    await q.query('START TRANSACTION');
    assert.equal(await grant(q, 'bell:race', 'first'), 2);
    const second = grant(p, 'bell:race', 'second'); // waits on the first's uncommitted claim
    await new Promise((resolve) => setTimeout(resolve, 200));
    await q.query('COMMIT');
    // Refused either way: a duplicate of the first's claim (1062), or the first's claim read as the newest, live (1048).
    const refused = await second;
    assert.ok(typeof refused === 'object' && [1048, 1062].includes(refused.errno), `refused, got ${JSON.stringify(refused)}`);
    assert.deepEqual(await rowsOf('bell:race'), ['before:1:RELEASED', 'first:2:ACQUIRED']);
  });

  it("a grant that waited for the previous holder's release begins after it, not when its statement began", async () => {
    // The INSERT's token subquery reads the newest claim with a locking read: a release in flight
    // holds it, and the grant decides only once that release commits. The row must say so: its
    // interval (acquired_at) after the release, else the log shows two holders at once.
    await keyRow('bell:late', 1);
    await logRow('bell:late', { token: 2, status: 'ACQUIRED', owner: 'previous' });
    await q.query('START TRANSACTION');
    await q.query(`UPDATE db_lock_log SET status = 'RELEASED', ended_at = UTC_TIMESTAMP(6) WHERE lock_key = ? AND fencing_token = 2`, [
      Buffer.from('bell:late'),
    ]);
    const granted = grant(p, 'bell:late', 'next'); // waits on the release's row lock
    await new Promise((resolve) => setTimeout(resolve, 300));
    await q.query('COMMIT');
    assert.equal(await granted, 3, 'granted once the release committed');
    const [row] = await db.query<{ gap_ms: number | string }[]>(
      `SELECT TIMESTAMPDIFF(MICROSECOND, prev.ended_at, next.acquired_at) / 1000 AS gap_ms FROM db_lock_log prev JOIN db_lock_log next ` +
        `ON next.lock_key = prev.lock_key AND next.owner = 'next' WHERE prev.owner = 'previous'`,
    );
    // The release's statement began about 300 ms before it committed; the grant began after the commit (margin: 200 ms).
    assert.ok(Number(row!.gap_ms) >= 200, `the grant's interval begins ${String(row!.gap_ms)} ms after the release's end`);
  });
});
