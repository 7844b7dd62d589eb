import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { LockConnectionPool } from '../../lib/store/mysql/lock-connection-pool.js';
import { TestDatabase } from '../support/test-database.js';
import { eventually } from '../support/lock-app.js';
import { contractSuite } from '../support/contract-targets.js';

/**
 * The library keeps a connection between statements (taking it back costs no tick). When the
 * server closes one meanwhile (KILL, wait_timeout, a restart), the next statement must go on a
 * live connection: before, it failed with "Can't add new command when connection is in closed
 * state", and a renewal or a release paid a failed round trip for a connection nobody used.
 */
contractSuite('lease-mechanics', 'a kept lock connection the server closed', () => {
  let db: TestDatabase;
  let pool: LockConnectionPool;

  before(async () => {
    db = await TestDatabase.create();
    pool = new LockConnectionPool({ ...db.settings, connectionLimit: 2, multipleStatements: true });
  });
  after(async () => {
    await pool?.close();
    await db?.drop();
  });

  it('is dropped, and the next statement runs on a live one', async () => {
    const session = async () => Number((await pool.query<{ id: number }[]>('SELECT CONNECTION_ID() AS id', { purpose: 'locks' }))[0]!.id);
    const killed = await session();
    await db.query(`KILL CONNECTION ${killed}`);
    const gone = async () =>
      Number((await db.query<{ n: number }[]>('SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST WHERE ID = ?', [killed]))[0]!.n) === 0;
    await eventually(gone, 5_000, 'the killed session to leave the server');
    // The client learns of the close from its socket: wait for that event (a loaded machine may take a while).
    const kept = () => pool.keptConnections as unknown as { threadId: number; state?: string }[];
    await eventually(() => kept().every((c) => c.threadId !== killed || c.state !== 'authenticated'), 5_000, 'the client to see the close');
    assert.ok(
      kept().some((c) => c.threadId === killed),
      'the killed connection is still kept (else this test proves nothing)',
    );
    const next = await session();
    assert.notEqual(next, killed, 'a new session');
  });
});
