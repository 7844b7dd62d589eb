import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { LockConnectionPool } from '../../lib/store/mysql/lock-connection-pool.js';
import { notSentInTime, PgLockPool } from '../../lib/store/postgres/pg-pool.js';
import { LockStatementError } from '../../lib/store/lock-statement.error.js';
import { TestDatabase } from '../support/test-database.js';
import { eventually } from '../support/lock-app.js';
import { contractSuite } from '../support/contract-targets.js';
import { sessionIds } from '../support/server-sessions.js';

/**
 * A lock statement that does not answer, and a wait for a lock connection that does not come, end
 * at the caller's deadline (one shared timer watches them all): the caller gets a 'deadline'
 * error in time, and a connection still running the statement is closed, never reused. On
 * PostgreSQL (pgDeadlines below): the library's pg pool, a statement's answer bound and a grant's
 * bounded checkout.
 */
contractSuite('lease-mechanics', 'deadlines of lock statements and pool waits', { postgres: true }, (target) => {
  let db: TestDatabase;
  let pool: LockConnectionPool;

  before(async () => {
    db = await TestDatabase.forTarget(target);
    if (db.type !== 'postgres') pool = new LockConnectionPool({ ...db.settings, connectionLimit: 1, multipleStatements: true });
  });
  after(async () => {
    await pool?.close();
    await db?.drop();
  });

  if (target.database === 'postgres') return pgDeadlines(() => db);

  it('ends a statement that does not answer at its deadline, and closes its connection', async () => {
    const id = Number((await pool.query<{ id: number }[]>('SELECT CONNECTION_ID() AS id', { purpose: 'locks' }))[0]!.id);
    // A later deadline already watched must not hold back this earlier one.
    const laterFrom = performance.now();
    const later = pool.query('SELECT SLEEP(3)', { purpose: 'admin', lane: 'reserved', deadline: laterFrom + 1_000 });
    const { error, tookMs } = await failure(() => pool.query('SELECT SLEEP(5)', { purpose: 'locks', deadline: performance.now() + 200 }));
    assert.ok(error instanceof LockStatementError && error.kind === 'deadline', String(error));
    // Margin: the deadline is 200 ms; up to 600 ms more tolerates a loaded 2-core host (never before it).
    assert.ok(tookMs >= 195 && tookMs < 800, `failed after ${tookMs.toFixed(0)} ms`);
    const late = await failure(() => later);
    const lateAfter = performance.now() - laterFrom;
    assert.ok(late.error instanceof LockStatementError && late.error.kind === 'deadline', String(late.error));
    // Its own deadline (1,000 ms), not the first one's, and not the statement's end (3 s); 1 s of margin on a loaded host.
    assert.ok(lateAfter >= 995 && lateAfter < 2_000, `the later deadline ended the statement after ${lateAfter.toFixed(0)} ms`);
    // The cut connection left the server (closed, not kept for the next statement).
    const gone = async () =>
      Number((await db.query<{ n: number }[]>('SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST WHERE ID = ?', [id]))[0]!.n) === 0;
    await eventually(gone, 5_000, 'the cut connection to close');
    const next = Number((await pool.query<{ id: number }[]>('SELECT CONNECTION_ID() AS id', { purpose: 'locks' }))[0]!.id);
    assert.notEqual(next, id);
  });

  it('ends a wait for a lock connection at its deadline while the pool is busy', async () => {
    const busy = pool.query('SELECT SLEEP(1)', { purpose: 'locks' }); // the shared lane's only connection
    const { error, tookMs } = await failure(() => pool.query('SELECT 1', { purpose: 'locks', deadline: performance.now() + 150 }));
    assert.ok(error instanceof LockStatementError && error.kind === 'deadline', String(error));
    assert.ok(tookMs >= 145 && tookMs < 750, `failed after ${tookMs.toFixed(0)} ms`);
    await busy;
    // Negative control: without a deadline the same wait ends when the connection frees.
    const again = pool.query('SELECT SLEEP(0.3)', { purpose: 'locks' });
    assert.deepEqual(await pool.query<{ one: number }[]>('SELECT 1 AS one', { purpose: 'locks' }), [{ one: 1 }]);
    await again;
  });

  it("handles a failed statement's answer once, whether its connection was kept or had to be taken from mysql2", async () => {
    // A pool of its own: its first statement takes a connection from mysql2 (the path with a promise in front), the second a kept one.
    const fresh = new LockConnectionPool({ ...db.settings, connectionLimit: 1, multipleStatements: true });
    try {
      for (const connection of ['taken from mysql2', 'kept']) {
        let rescued = 0;
        const { error } = await failure(() =>
          fresh.queryThen('SELECT no_such_column FROM DUAL', { purpose: 'locks' }, String, (failed) => {
            rescued++;
            throw failed; // a handler that fails in turn (a full grant plan that throws) must not be handed its own error again
          }),
        );
        assert.ok(error instanceof LockStatementError, String(error));
        assert.equal(rescued, 1, `rescue calls with a connection ${connection}`);
        // The pool still answers (the failed statement's connection went back or was replaced).
        assert.deepEqual(await fresh.query<{ one: number }[]>('SELECT 1 AS one', { purpose: 'locks' }), [{ one: 1 }]);
      }
    } finally {
      await fresh.close();
    }
  });
});

/** How long `run` took to fail, and with what. */
async function failure(run: () => Promise<unknown>): Promise<{ error: unknown; tookMs: number }> {
  const started = performance.now();
  try {
    await run();
  } catch (error) {
    return { error, tookMs: performance.now() - started };
  }
  assert.fail('expected a failure');
}

/**
 * The same on PostgreSQL, through the library's pg pool (PgLockPool): a round trip's answer bound
 * (pg's query_timeout), and a grant's wait for a connection bounded by its deadline
 * (acquireDedicated with notSentInTime, as pg-lease-grant.ts asks). A failed statement's answer is
 * handled once by the store's own code (no rescue callback: mysql2's callback path has no pg
 * counterpart), so the third test is MySQL's only.
 */
function pgDeadlines(db: () => TestDatabase): void {
  let pool: PgLockPool;
  before(() => {
    const { host, port, user, password, database } = db().settings;
    pool = new PgLockPool({ host, port, user, password, database, max: 2 });
  });
  after(() => pool?.close());

  const pid = async (): Promise<number> => Number((await pool.query('SELECT pg_backend_pid() AS id', 'locks'))[0]!.rows[0]!.id);
  const onServer = async (pids: number[]): Promise<number> => (await sessionIds(db())).filter((id) => pids.includes(id)).length;

  it('ends a statement that does not answer at its deadline, and closes its connection', async () => {
    // Both of the pool's connections open (the two statements below each take one of them).
    const ids = await Promise.all([0, 1].map(() => pool.query('SELECT pg_backend_pid() AS id, pg_sleep(0.1)', 'locks')));
    const opened = ids.map((r) => Number(r[0]!.rows[0]!.id));
    assert.equal(new Set(opened).size, 2, `two connections: ${opened.join(', ')}`);
    // A later deadline already watched must not hold back this earlier one.
    const laterFrom = performance.now();
    const later = pool.query('SELECT pg_sleep(3)', 'admin', 1_000);
    const { error, tookMs } = await failure(() => pool.query('SELECT pg_sleep(5)', 'locks', 200));
    assert.ok(error instanceof LockStatementError && error.kind === 'deadline', String(error));
    // Margin: the deadline is 200 ms; up to 600 ms more tolerates a loaded 2-core host (never before it).
    assert.ok(tookMs >= 195 && tookMs < 800, `failed after ${tookMs.toFixed(0)} ms`);
    const late = await failure(() => later);
    const lateAfter = performance.now() - laterFrom;
    assert.ok(late.error instanceof LockStatementError && late.error.kind === 'deadline', String(late.error));
    // Its own deadline (1,000 ms), not the first one's, and not the statement's end (3 s); 1 s of margin on a loaded host.
    assert.ok(lateAfter >= 995 && lateAfter < 2_000, `the later deadline ended the statement after ${lateAfter.toFixed(0)} ms`);
    // The cut connections left the server (closed, not kept for the next statement).
    await eventually(async () => (await onServer(opened)) === 0, 5_000, 'the cut connections to close');
    const next = await pid();
    assert.ok(!opened.includes(next), `a new session: ${next} after ${opened.join(', ')}`);
  });

  it('ends a wait for a lock connection at its deadline while the pool is busy', async () => {
    const busy = [0, 1].map(() => pool.query('SELECT pg_sleep(1)', 'locks')); // the pool's two connections
    const { error, tookMs } = await failure(() => pool.acquireDedicated(performance.now() + 150, undefined, notSentInTime));
    assert.ok(error instanceof LockStatementError && error.kind === 'deadline', String(error));
    assert.ok(tookMs >= 145 && tookMs < 750, `failed after ${tookMs.toFixed(0)} ms`);
    await Promise.all(busy);
    // Negative control: without a deadline the same wait ends when a connection frees.
    const again = [0, 1].map(() => pool.query('SELECT pg_sleep(0.3)', 'locks'));
    assert.deepEqual((await pool.query('SELECT 1 AS one', 'locks'))[0]!.rows, [{ one: 1 }]);
    await Promise.all(again);
  });
}
