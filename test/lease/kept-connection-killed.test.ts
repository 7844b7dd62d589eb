import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { LockConnectionPool } from '../../lib/store/mysql/lock-connection-pool.js';
import { PgLockPool } from '../../lib/store/postgres/pg-pool.js';
import { TestDatabase } from '../support/test-database.js';
import { eventually } from '../support/lock-app.js';
import { killSession, sessionIdSql, sessionIds } from '../support/server-sessions.js';
import { contractSuite } from '../support/contract-targets.js';

/**
 * The library keeps a connection between statements (taking it back costs no tick). When the
 * server closes one meanwhile (KILL, wait_timeout, a restart), the next statement must go on a
 * live connection: before, it failed with "Can't add new command when connection is in closed
 * state", and a renewal or a release paid a failed round trip for a connection nobody used.
 * On PostgreSQL the library's pool keeps its idle clients in pg's pool: the one whose backend was
 * terminated (pg_terminate_backend) must not carry the next statement.
 */
contractSuite('lease-mechanics', 'a kept lock connection the server closed', { postgres: true }, (target) => {
  let db: TestDatabase;
  let pool: LockConnectionPool | undefined;
  let pgPool: PgLockPool | undefined;

  before(async () => {
    db = await TestDatabase.forTarget(target);
    if (db.type === 'postgres') {
      const { host, port, user, password, database } = db.settings;
      pgPool = new PgLockPool({ host, port, user, password, database, max: 2 });
    } else pool = new LockConnectionPool({ ...db.settings, connectionLimit: 2, multipleStatements: true });
  });
  after(async () => {
    await pool?.close();
    await pgPool?.close();
    await db?.drop();
  });

  /** The server session of the library pool's next statement. */
  async function session(): Promise<number> {
    if (pgPool) return Number((await pgPool.query(sessionIdSql(db), 'locks'))[0]!.rows[0]!.id);
    return Number((await pool!.query<{ id: number }[]>(sessionIdSql(db), { purpose: 'locks' }))[0]!.id);
  }

  const gone = (killed: number) => async () => !(await sessionIds(db)).includes(killed);

  it('is dropped, and the next statement runs on a live one', async () => {
    const killed = await session();
    if (pgPool) {
      // pg's pool: its clients, the idle ones among them.
      type Client = { processID: number; _queryable?: boolean; _ending?: boolean };
      const clients = (pgPool as unknown as { pool: { _clients: Client[]; _idle: { client: Client }[] } }).pool;
      assert.ok(
        clients._idle.some((i) => i.client.processID === killed),
        'the connection is kept idle in the pool (else this test proves nothing)',
      );
      await killSession(db, killed);
      await eventually(gone(killed), 5_000, 'the killed session to leave the server');
      // The client learns of the close from its socket: wait for that event (a loaded machine may take a while).
      const seen = () => clients._clients.every((c) => c.processID !== killed || c._queryable === false || c._ending === true);
      await eventually(seen, 5_000, 'the client to see the close');
    } else {
      await killSession(db, killed);
      await eventually(gone(killed), 5_000, 'the killed session to leave the server');
      // The client learns of the close from its socket: wait for that event (a loaded machine may take a while).
      const kept = () => pool!.keptConnections as unknown as { threadId: number; state?: string }[];
      await eventually(() => kept().every((c) => c.threadId !== killed || c.state !== 'authenticated'), 5_000, 'the client to see the close');
      assert.ok(
        kept().some((c) => c.threadId === killed),
        'the killed connection is still kept (else this test proves nothing)',
      );
    }
    const next = await session();
    assert.notEqual(next, killed, 'a new session');
  });
});
