import 'reflect-metadata';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, beforeEach, describe, it } from 'node:test';
import pg from 'pg';
import { resolveTargets } from '../../lib/core/lock-key.js';
import { bellGrantBatch } from '../../lib/store/postgres/pg-bell-grant.sql.js';
import { PgTestDatabase, pgTestsRun } from '../support/pg-test-database.js';

/**
 * The one-statement grant a single-key writer sends behind the key's doorbell (bellGrantBatch),
 * against the real server, statement by statement: it grants a free key with the next token, and
 * refuses, writing nothing, whenever someone holds the key or was granted it meanwhile: a holder
 * its snapshot sees; a grant of another path (a reader, several keys) that commits while the
 * statement waits for the key row, after its snapshot was taken (the case its token test is for);
 * a row-lock writer's bump. A grant in flight that rolls back lets it through. The doorbell itself
 * is not needed to test the statement: the other sessions here stand for whoever bypasses it.
 */
describe('the grant behind a doorbell, on PostgreSQL', { skip: (await pgTestsRun()) ? false : 'no PostgreSQL server' }, () => {
  let db: PgTestDatabase;
  let mine: pg.Client;
  let theirs: pg.Client;
  const key = 'bell:grant';
  const keyBytes = `'\\x${Buffer.from(key).toString('hex')}'::bytea`;

  before(async () => {
    db = await PgTestDatabase.create('dblock_pg_bellgrant');
    const dataSource = await db.dataSource();
    await dataSource.runMigrations();
    await dataSource.destroy();
    mine = new pg.Client({ connectionString: db.url });
    theirs = new pg.Client({ connectionString: db.url });
    await Promise.all([mine.connect(), theirs.connect()]);
  });
  after(async () => {
    await Promise.allSettled([mine?.end(), theirs?.end()]);
    await db?.drop();
  });
  beforeEach(async () => {
    await db.query('DELETE FROM db_lock_log');
    await db.query('DELETE FROM db_lock');
    await db.query(`INSERT INTO db_lock (lock_key, fencing_token) VALUES (${keyBytes}, 7)`);
  });

  /** The bell grant of one writer of `key`, as the store builds it. */
  const batchFor = () =>
    bellGrantBatch({
      request: {
        acquisitionId: randomUUID(),
        strategy: 'lease',
        targets: resolveTargets(key, 'write', 'default').map((t) => ({ ...t, bytes: Buffer.from(key) })),
        leaseMs: 30_000,
        waitedMs: 0,
        writerWaitMarkMs: 0,
        writerPreference: true,
      },
      holder: 'test:1',
      processId: '1',
      waitMs: 5_000,
    });
  /** Sends the bell grant on `mine`: the granted row's token, or undefined when refused. */
  const bellGrant = async (): Promise<number | undefined> => {
    const batch = batchFor();
    const answer = batch.parse((await mine.query(batch.sql)) as unknown as pg.QueryResult[]);
    return answer.granted ? answer.rows[0]!.fencingToken : undefined;
  };
  /** Another path's grant, as every grant writes it: the key row's token bumped, a live row with it. */
  const theirGrant = `UPDATE db_lock SET fencing_token = fencing_token + 1 WHERE lock_key = ${keyBytes};
    INSERT INTO db_lock_log (lock_key, mode, owner, holder, strategy, fencing_token, status, lease_ms, acquired_at, expires_at)
    SELECT lock_key, 'read', 'theirs', 'other:1', 'lease', fencing_token, 'ACQUIRED', 30000, clock_timestamp(), clock_timestamp() + interval '30 seconds'
    FROM db_lock WHERE lock_key = ${keyBytes}`;
  const rows = () =>
    db.query<{ owner: string; fencing_token: string; status: string }>(
      'SELECT trim(owner) AS owner, fencing_token, status FROM db_lock_log ORDER BY id',
    );
  /** Resolves once `pid` waits for a lock. */
  const waitingOnALock = async (pid: number): Promise<void> => {
    for (let i = 0; i < 200; i++) {
      const [row] = await db.query<{ waiting: boolean }>(`SELECT wait_event_type = 'Lock' AS waiting FROM pg_stat_activity WHERE pid = ${pid}`);
      if (row?.waiting) return;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    throw new Error('the grant never waited for the key row');
  };
  const pidOf = async (client: pg.Client) => Number((await client.query('SELECT pg_backend_pid() AS pid')).rows[0].pid);

  it('grants a free key with its next token, one live row', async () => {
    assert.equal(await bellGrant(), 8);
    assert.deepEqual(
      (await rows()).map((r) => [r.fencing_token, r.status]),
      [['8', 'ACQUIRED']],
    );
  });

  it('refuses, writing nothing, while a holder it can see is live', async () => {
    await theirs.query(theirGrant);
    assert.equal(await bellGrant(), undefined);
    assert.deepEqual(
      (await rows()).map((r) => r.owner),
      ['theirs'],
    );
  });

  it('refuses a key granted by another path after its snapshot, while it waited for the key row', async () => {
    const myPid = await pidOf(mine);
    await theirs.query(`BEGIN; ${theirGrant}`);
    const asked = bellGrant();
    await waitingOnALock(myPid);
    await theirs.query('COMMIT');
    assert.equal(await asked, undefined);
    assert.deepEqual(
      (await rows()).map((r) => [r.owner, r.fencing_token]),
      [['theirs', '8']],
    );
  });

  it('grants once a grant in flight rolls back, with the token that grant would have taken', async () => {
    const myPid = await pidOf(mine);
    await theirs.query(`BEGIN; ${theirGrant}`);
    const asked = bellGrant();
    await waitingOnALock(myPid);
    await theirs.query('ROLLBACK');
    assert.equal(await asked, 8);
    assert.deepEqual(
      (await rows()).map((r) => [r.owner === 'theirs', r.fencing_token]),
      [[false, '8']],
    );
  });

  it('refuses after a row-lock writer committed its bump, and a missing key row refuses too', async () => {
    const myPid = await pidOf(mine);
    await theirs.query(`BEGIN; UPDATE db_lock SET fencing_token = fencing_token + 1 WHERE lock_key = ${keyBytes}`);
    const asked = bellGrant();
    await waitingOnALock(myPid);
    await theirs.query('COMMIT');
    assert.equal(await asked, undefined);
    await db.query('DELETE FROM db_lock');
    assert.equal(await bellGrant(), undefined);
    assert.deepEqual(await rows(), []);
  });

  it('negative control: without its token test, the grant that waited writes a second holder beside the first', async () => {
    const myPid = await pidOf(mine);
    await theirs.query(`BEGIN; ${theirGrant}`);
    const tokenTest = ' AND l.fencing_token = cur.t';
    const { sql } = batchFor();
    assert.ok(sql.includes(tokenTest), 'the control removes the token test from the statement the store sends');
    const batch = sql.replace(tokenTest, '');
    const asked = mine.query(batch) as unknown as Promise<pg.QueryResult[]>;
    await waitingOnALock(myPid);
    await theirs.query('COMMIT');
    await asked;
    assert.deepEqual(
      (await rows()).map((r) => r.status),
      ['ACQUIRED', 'ACQUIRED'],
    );
  });
});
