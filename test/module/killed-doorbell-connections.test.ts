import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import { type LockHandle, type LockService } from '../../lib/index.js';
import { bellName } from '../../lib/store/mysql/doorbells.js';
import { bellKey } from '../../lib/store/postgres/pg-doorbells.js';
import { createLockApp, eventually } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';
import { bounded, describeError } from '../support/settled.js';
import { contractSuite } from '../support/contract-targets.js';
import { sessionCount } from '../support/server-sessions.js';

/**
 * Lease doorbells (GET_LOCK named locks) broken by the server: a waiter's GET_LOCK killed (KILL
 * QUERY / KILL CONNECTION) while it waits, and a holder's bell connection killed while it holds the
 * key. The waiter still gets the key soon after the holder lets go (never stuck behind a dead bell),
 * the holder's release still succeeds (on the pool), the lock is never held twice, and no
 * connection is left after app.close(). PostgreSQL: the bells are session advisory locks (pg_locks),
 * KILL QUERY is pg_cancel_backend and KILL CONNECTION pg_terminate_backend.
 */

/** Sessions holding (granted) or waiting for a key's bell, from pg_locks: its 64-bit key split in classid and objid. */
const PG_BELL = (granted: boolean) =>
  `SELECT pid AS id FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1 AND ${granted ? "granted AND mode = 'ExclusiveLock'" : 'NOT granted'} ` +
  `AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) AND ((classid::bigint << 32) | objid::bigint) = ?::bigint`;

contractSuite('lease-mechanics', 'doorbells killed', { postgres: true }, (target) => {
  let db: TestDatabase;
  let app1: INestApplicationContext;
  let p1: LockService;
  let app2: INestApplicationContext;
  let p2: LockService;

  before(async () => {
    db = await TestDatabase.forTarget(target);
    ({ app: app1, locks: p1 } = await createLockApp(db.settings, target.options({ janitor: false, leaseMs: 10_000 })));
    ({ app: app2, locks: p2 } = await createLockApp(db.settings, target.options({ janitor: false, leaseMs: 10_000 })));
  });
  after(async () => {
    await app1?.close();
    await app2?.close();
    await db?.drop();
  });

  /** Sessions waiting for a bell (in GET_LOCK; PostgreSQL: for `key`'s advisory lock). */
  async function getLockThreads(key: string): Promise<number[]> {
    if (db.type === 'postgres') return (await db.query<{ id: number }[]>(PG_BELL(false), [bellKey(key)])).map((r) => Number(r.id));
    const rows = await db.query<{ ID: number }[]>(
      `SELECT ID FROM information_schema.PROCESSLIST WHERE DB = ? AND ID <> CONNECTION_ID() AND COMMAND = 'Query' AND INFO LIKE '%GET_LOCK%'`,
      [db.name],
    );
    return rows.map((r) => Number(r.ID));
  }

  async function bellHolder(key: string): Promise<number | null> {
    if (db.type === 'postgres') {
      const [row] = await db.query<{ id: number }[]>(PG_BELL(true), [bellKey(key)]);
      return row === undefined ? null : Number(row.id);
    }
    const rows = await db.query<{ id: number | null }[]>(`SELECT IS_USED_LOCK(?) AS id`, [bellName(db.name, key)]);
    return rows[0]!.id === null ? null : Number(rows[0]!.id);
  }

  /** KILL QUERY / KILL CONNECTION (PostgreSQL: pg_cancel_backend / pg_terminate_backend). */
  async function kill(how: 'QUERY' | 'CONNECTION', id: number): Promise<void> {
    if (db.type !== 'postgres') return void (await db.query(`KILL ${how} ${id}`));
    // Fails as KILL does when the session is gone (the functions answer false).
    const [row] = await db.query<{ ok: boolean }[]>(`SELECT ${how === 'QUERY' ? 'pg_cancel_backend' : 'pg_terminate_backend'}(?) AS ok`, [id]);
    if (row?.ok !== true) throw new Error(`no session ${id} to signal`);
  }

  for (const how of ['QUERY', 'CONNECTION'] as const) {
    it(`a waiter's bell (GET_LOCK: KILL ${how}, its connection: KILL CONNECTION) killed, then the holder's bell connection killed: no one stuck, never two holders`, async () => {
      const key = `bell-${how}`;
      const first = await p1.acquire(key);
      const waiting = p2.acquire(key, { timeoutMs: 20_000 });
      let second: LockHandle | undefined;
      let waitError: unknown;
      void waiting.then(
        (l) => (second = l),
        (e: unknown) => (waitError = e),
      );
      // The waiter takes the key's bell (GET_LOCK answers at once: the first holder has none) or blocks on it.
      await eventually(async () => (await getLockThreads(key)).length > 0 || (await bellHolder(key)) !== null, 5_000, 'the waiter to use the bell');
      let killed = 0;
      const until = performance.now() + 1_500;
      while (performance.now() < until) {
        for (const id of await getLockThreads(key))
          await kill(how, id).then(
            () => killed++,
            () => undefined,
          );
        const holder = await bellHolder(key);
        if (holder !== null)
          await kill('CONNECTION', holder).then(
            () => killed++,
            () => undefined,
          );
        await new Promise((r) => setTimeout(r, 30));
      }
      assert.ok(killed >= 1, 'the waiter was killed at least once');
      assert.equal(second, undefined, 'the waiter is not granted while the first holds the key');
      assert.equal(waitError, undefined, `the waiter kept waiting within its budget, got ${describeError(waitError)}`);
      const releasedAt = performance.now();
      await bounded(first.release(), 10_000, 'the first release');
      const lock2 = await bounded(waiting, 10_000, 'the waiter after the release');
      const tookMs = performance.now() - releasedAt;
      assert.ok(tookMs < 3_000, `the waiter got the key ${Math.round(tookMs)} ms after the release (a dead bell kept it waiting?)`);

      // Now p1 waits on the key p2 holds; kill p2's bell connection (it holds the bell after its bell wait).
      const waiting1 = p1.acquire(key, { timeoutMs: 20_000 });
      let third: LockHandle | undefined;
      void waiting1.then(
        (l) => (third = l),
        () => undefined,
      );
      await eventually(async () => (await getLockThreads(key)).length > 0 || (await bellHolder(key)) !== null, 5_000, 'p1 to wait');
      await new Promise((r) => setTimeout(r, 300));
      for (let i = 0; i < 5; i++) {
        const holder = await bellHolder(key);
        if (holder !== null) await kill('CONNECTION', holder).catch(() => undefined);
        await new Promise((r) => setTimeout(r, 100));
      }
      assert.equal(third, undefined, 'p1 is not granted while p2 holds the key: never two holders');
      const info = await p1.inspect(key);
      assert.equal(info.holders.length, 1, `one holder: ${JSON.stringify(info.holders)}`);
      const releasedAt2 = performance.now();
      await bounded(
        lock2.release().catch((e: unknown) => assert.fail(`p2's release after its bell connection died failed: ${describeError(e)}`)),
        10_000,
        'p2 release',
      );
      const lock3 = await bounded(waiting1, 10_000, 'p1 after p2 released');
      const took2 = performance.now() - releasedAt2;
      assert.ok(took2 < 3_000, `p1 got the key ${Math.round(took2)} ms after p2's release`);
      await lock3.release();
      assert.equal(p1.stats().held, 0);
      assert.equal(p2.stats().held, 0);
      assert.equal(p1.stats().waiting, 0);
      assert.equal(p2.stats().waiting, 0);
    });
  }

  it('no connection of the apps is left after app.close()', async () => {
    await bounded(app1.close(), 20_000, 'app1.close()');
    await bounded(app2.close(), 20_000, 'app2.close()');
    let n = -1;
    await eventually(
      async () => {
        n = await sessionCount(db);
        return n === 0;
      },
      3_000,
      'connections gone',
    ).catch(() => assert.fail(`${n} connection(s) of the closed apps left`));
    app1 = undefined as never;
    app2 = undefined as never;
  });
});
