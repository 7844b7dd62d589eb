import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { INestApplicationContext } from '@nestjs/common';
import pg from 'pg';
import type { LockHandle, LockService } from '../../lib/index.js';
import { bellKey } from '../../lib/store/postgres/pg-doorbells.js';
import { createLockApp, eventually } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';
import { pgServerUrl, pgTestsRun } from '../support/pg-test-database.js';
import { bounded, describeError } from '../support/settled.js';

/**
 * Lease doorbells on PostgreSQL (session advisory locks): a waiting writer queues on the key's
 * bell, a grant not sent through the bell waits its turn behind it, and a bell session terminated
 * by the server (pg_terminate_backend) costs speed only: the holder's release still ends its row,
 * the waiter gets the key, and the key never has two holders. Fair handoff across processes is
 * the hot-key test's (test/lease/hot-key-alternation.test.ts), which runs here too.
 */
describe('doorbells on PostgreSQL', { skip: (await pgTestsRun()) ? false : 'no PostgreSQL server' }, () => {
  let db: TestDatabase;
  let app1: INestApplicationContext;
  let app2: INestApplicationContext;
  let p1: LockService;
  let p2: LockService;
  let admin: pg.Client;

  before(async () => {
    db = await TestDatabase.forTarget({ serverUrl: pgServerUrl() });
    ({ app: app1, locks: p1 } = await createLockApp(db.settings, { janitor: false, leaseMs: 10_000 }));
    ({ app: app2, locks: p2 } = await createLockApp(db.settings, { janitor: false, leaseMs: 10_000 }));
    admin = new pg.Client({ connectionString: new URL(db.name, pgServerUrl()).href });
    await admin.connect();
  });
  after(async () => {
    await admin?.end();
    await app1?.close();
    await app2?.close();
    await db?.drop();
  });

  /** Sessions holding (granted) or waiting for (not granted) the key's bell. */
  async function bellSessions(key: string): Promise<{ pid: number; granted: boolean }[]> {
    const { rows } = await admin.query<{ pid: number; granted: boolean }>(
      `SELECT pid, granted FROM pg_locks WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) ` +
        `AND ((classid::bigint << 32) | objid::bigint) = $1 AND objsubid = 1`,
      [bellKey(key)],
    );
    return rows;
  }

  it('a waiting writer queues on the bell; a grant not sent through it is refused while the bell is taken, granted once it is free', async () => {
    const key = 'turn';
    const first = await p1.acquire(key);
    const waiting = p2.acquire(key, { timeoutMs: 20_000 });
    await eventually(async () => (await bellSessions(key)).some((s) => s.granted), 5_000, 'the waiter to take the bell');
    await first.release();
    const second = await bounded(waiting, 5_000, 'the waiter after the release');
    await second.release();
    // Control: with the bell taken by another session (here the test's own), a free key is refused...
    // (Its key was just held: a bell outlives the turn 2 s after the key's newest claim ended.)
    const unused = 'turn-held-bell';
    await (await p1.acquire(unused)).release();
    await admin.query('SELECT pg_advisory_lock($1)', [bellKey(unused)]);
    try {
      assert.equal(await p1.tryAcquire(unused), null, 'a grant barged past the session that has the bell');
      const other = await p1.tryAcquire('turn-free-bell');
      assert.ok(other, 'a key whose bell nobody has is granted');
      await other.release();
    } finally {
      await admin.query('SELECT pg_advisory_unlock($1)', [bellKey(unused)]);
    }
    // ...and granted once the bell is free.
    const now = await p1.tryAcquire(unused);
    assert.ok(now, 'granted after the bell was freed');
    await now.release();
  });

  it('a bell session terminated while its holder holds the key: the release still ends the row, the waiter gets in, never two holders', async () => {
    const key = 'killed';
    const first = await p1.acquire(key);
    // p2 waits; it takes the bell (nobody has it) and asks through it until p1 lets go.
    const waiting = p2.acquire(key, { timeoutMs: 20_000 });
    let second: LockHandle | undefined;
    void waiting.then(
      (l) => (second = l),
      () => undefined,
    );
    await eventually(async () => (await bellSessions(key)).some((s) => s.granted), 5_000, 'p2 to take the bell');
    await first.release();
    second = await bounded(waiting, 5_000, 'p2 after the release');
    // p1 now waits behind p2, whose bell session is terminated while it holds the key.
    const waiting1 = p1.acquire(key, { timeoutMs: 20_000 });
    let third: LockHandle | undefined;
    let thirdError: unknown;
    void waiting1.then(
      (l) => (third = l),
      (e: unknown) => (thirdError = e),
    );
    await eventually(async () => (await bellSessions(key)).length > 0, 5_000, 'p1 to wait on the bell');
    let terminated = 0;
    for (let i = 0; i < 5; i++) {
      for (const s of await bellSessions(key)) {
        const { rows } = await admin.query<{ ok: boolean }>('SELECT pg_terminate_backend($1) AS ok', [s.pid]);
        if (rows[0]?.ok) terminated++;
      }
      await sleep(100);
    }
    assert.ok(terminated >= 1, 'a bell session was terminated');
    assert.equal(third, undefined, 'p1 was granted while p2 holds the key');
    assert.equal(thirdError, undefined, `p1 kept waiting within its budget, got ${describeError(thirdError)}`);
    assert.equal((await p1.inspect(key)).holders.length, 1, 'one holder');
    await bounded(second.release(), 10_000, "p2's release after its bell session died");
    const lock3 = await bounded(waiting1, 10_000, "p1 after p2's release");
    const rows = await db.logRows(key);
    assert.deepEqual(
      rows.map((r) => [Number(r.fencing_token), r.status]),
      [
        [1, 'RELEASED'],
        [2, 'RELEASED'],
        [3, 'ACQUIRED'],
      ],
      'each hold ended before the next began',
    );
    await lock3.release();
    for (const locks of [p1, p2]) assert.deepEqual([locks.stats().held, locks.stats().waiting], [0, 0]);
    // No bell is left behind once the idle ones are rung.
    await eventually(async () => (await bellSessions(key)).length === 0, 5_000, 'the bells to go');
  });

  it('a waiter the holder rang is granted in one statement behind its wait, and a waiter refused by a holder it sees gets the full grant', async () => {
    const key = 'rung';
    const sent: string[] = [];
    const query = pg.Client.prototype.query;
    pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
      const config = args[0] as string | { text?: string };
      sent.push(typeof config === 'string' ? config : (config.text ?? ''));
      return (query as (...a: unknown[]) => unknown).apply(this, args);
    } as typeof query;
    try {
      const first = await p1.acquire(key);
      // p2 takes the free bell while p1 holds the key: its one-statement grant sees p1 and is refused.
      const second = p2.acquire(key, { timeoutMs: 20_000 });
      await eventually(async () => (await bellSessions(key)).some((s) => s.granted), 5_000, 'p2 to take the bell');
      const refusedAt = () => sent.findIndex((sql) => sql.includes('pg_advisory_lock(') && sql.includes('WITH cur AS'));
      const fullGrantAfterRefusal = () => refusedAt() >= 0 && sent.slice(refusedAt() + 1).some((sql) => sql.includes('EXECUTE db_lock_grant'));
      // p1 lets go only once p2's one-statement grant has been answered: a release ahead of it would grant it.
      await eventually(fullGrantAfterRefusal, 5_000, "p2's refusal and full grant while p1 holds");
      await first.release();
      const held2 = await bounded(second, 5_000, 'p2 after the release');
      assert.ok(refusedAt() >= 0, 'the grant behind the wait went as one statement');
      assert.ok(fullGrantAfterRefusal(), 'the refusal was followed by the full grant');
      // p1 queues on p2's bell; p2's release rings it; p1's grant behind its wait is the one statement, granted.
      sent.length = 0;
      const third = p1.acquire(key, { timeoutMs: 20_000 });
      await eventually(async () => (await bellSessions(key)).some((s) => !s.granted), 5_000, 'p1 to wait on the bell');
      await held2.release();
      const held3 = await bounded(third, 5_000, "p1 after p2's ring");
      // The wait rode with the one-statement grant, which p2's release had committed before it rang:
      // nothing more was sent (a ring ahead of the commit would let it see p2 live, refuse, and poll).
      const behindWait = sent.findIndex((sql) => sql.includes('pg_advisory_lock(') && sql.includes('WITH cur AS'));
      assert.ok(behindWait >= 0, 'p1 waited on the bell with the one-statement grant behind its wait');
      assert.deepEqual(
        sent.slice(behindWait + 1).filter((sql) => sql.includes('db_lock_grant') || sql.includes('WITH cur AS')),
        [],
        'no grant after the one behind the wait',
      );
      assert.deepEqual(
        (await db.logRows(key)).map((r) => [Number(r.fencing_token), r.status]),
        [
          [1, 'RELEASED'],
          [2, 'RELEASED'],
          [3, 'ACQUIRED'],
        ],
      );
      await held3.release();
    } finally {
      pg.Client.prototype.query = query;
    }
  });
});
