import 'reflect-metadata';
import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { type INestApplicationContext, Injectable } from '@nestjs/common';
import { LockService, WriteLock } from '../../lib/index.js';
import { createLockApp } from '../support/lock-app.js';
import { lockRoundTrips } from '../support/lock-internals.js';
import { TestDatabase } from '../support/test-database.js';
import { contractSuite } from '../support/contract-targets.js';
import { runSql } from '../support/portable-sql.js';

@Injectable()
class Ledger {
  constructor(readonly locks: LockService) {}

  @WriteLock('ledger:{0}')
  async post(account: number, cents: number, fail = false): Promise<number> {
    await runSql(this.locks.manager, 'UPDATE balances SET cents = cents + ? WHERE account = ?', [cents, account]);
    if (fail) throw new Error('business rule');
    return this.locks.currentLock!.fencingToken;
  }

  /** A nested decorated call on a new key joins the outer transaction and ends with it. */
  @WriteLock('ledger:{0}')
  async transfer(from: number, to: number, cents: number, fail = false): Promise<void> {
    await runSql(this.locks.manager, 'UPDATE balances SET cents = cents - ? WHERE account = ?', [cents, from]);
    await this.post(to, cents, fail);
  }
}

/** The rows of `sql`, each column as a number: PostgreSQL answers BIGINT columns as strings. */
async function numbers(db: TestDatabase, sql: string): Promise<Record<string, number>[]> {
  const rows = await db.query<Record<string, unknown>[]>(sql);
  return rows.map((row) => Object.fromEntries(Object.entries(row).map(([column, value]) => [column, Number(value)])));
}

/**
 * A decorated call ends its lock inside the transaction that commits its business work: the
 * grant and the business commit are the only two commits, and no release round trip follows.
 * On rollback the lock still ends (FAILED) and the key is free at once.
 */
contractSuite('lease-mechanics', 'lease: the lock ends in the fenced commit', { postgres: true }, (target) => {
  let db: TestDatabase;
  let app: INestApplicationContext;
  let locks: LockService;
  let ledger: Ledger;
  before(async () => {
    db = await TestDatabase.forTarget(target);
    await db.query('CREATE TABLE balances (account INT PRIMARY KEY, cents BIGINT NOT NULL)');
    await db.query('INSERT INTO balances VALUES (1, 0), (2, 0)');
    ({ app, locks } = await createLockApp(db.settings, target.options({ janitor: false }), { providers: [Ledger] }));
    ledger = app.get(Ledger);
    await ledger.post(1, 0); // first use of the key: its row exists from now on
  });
  after(async () => {
    await app?.close();
    await db?.drop();
  });

  it('one lock round trip (the grant) for a decorated call; its row is RELEASED by the business commit', async () => {
    const before = lockRoundTrips(locks);
    const token = await ledger.post(1, 500);
    assert.equal(lockRoundTrips(locks) - before, 1, 'the grant only: no release round trip after the commit');
    const rows = await db.logRows('ledger:1');
    const row = rows.find((r) => Number(r.fencing_token) === token)!;
    assert.equal(row.status, 'RELEASED');
    assert.equal(row.fenced_count, 0, 'ended by the fence itself, not fenced and then released');
    assert.deepEqual(await numbers(db, 'SELECT cents FROM balances WHERE account = 1'), [{ cents: 500 }]);
    assert.equal(locks.stats().held, 0);
  });

  it('a rollback ends the lock FAILED and the key is free at once; nothing was written', async () => {
    await assert.rejects(ledger.post(1, 700, true), /business rule/);
    const rows = await db.logRows('ledger:1');
    assert.equal(rows.at(-1)!.status, 'FAILED');
    assert.deepEqual(await numbers(db, 'SELECT cents FROM balances WHERE account = 1'), [{ cents: 500 }]);
    const next = await locks.tryAcquire('ledger:1');
    assert.ok(next, 'free at once');
    await next.release();
  });

  it('a nested call on another key joins the transaction; both locks end in its commit', async () => {
    await ledger.post(2, 0); // key rows exist
    const before = lockRoundTrips(locks);
    await ledger.transfer(1, 2, 100);
    assert.equal(lockRoundTrips(locks) - before, 2, 'two grants, no release round trips');
    for (const key of ['ledger:1', 'ledger:2']) assert.equal((await db.logRows(key)).at(-1)!.status, 'RELEASED');
    assert.deepEqual(await numbers(db, 'SELECT account, cents FROM balances ORDER BY account'), [
      { account: 1, cents: 400 },
      { account: 2, cents: 100 },
    ]);
  });

  it('a nested call that fails rolls both back and ends both locks FAILED', async () => {
    await assert.rejects(ledger.transfer(1, 2, 100, true), /business rule/);
    for (const key of ['ledger:1', 'ledger:2']) assert.equal((await db.logRows(key)).at(-1)!.status, 'FAILED');
    assert.deepEqual(await numbers(db, 'SELECT account, cents FROM balances ORDER BY account'), [
      { account: 1, cents: 400 },
      { account: 2, cents: 100 },
    ]);
    assert.equal(locks.stats().held, 0);
  });
});
