import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import { DataSource } from 'typeorm';
import type { LockService } from '../../lib/index.js';
import { createLockApp } from '../support/lock-app.js';
import { callerTrips } from '../support/round-trips.js';
import { TestDatabase } from '../support/test-database.js';
import { contractSuite } from '../support/contract-targets.js';
import { spyOnDataSourceStatements } from '../support/statement-spy.js';

/**
 * Statements of row-lock reader holds (README, "Row-lock fencing tokens" and the strategies table):
 * on a key a row-lock writer took last, START, the locking read and the record-and-commit CALL,
 * nothing on the library's pool; on a key a lease used since, the rare path on every reader hold
 * (readers cannot mark the key), until a row-lock writer takes it.
 */
contractSuite('row-lock-statements', 'statements per uncontended reader hold', (target) => {
  if (target.strategy !== 'row-lock') return;
  let db: TestDatabase;
  let app: INestApplicationContext;
  let locks: LockService;
  let sent: string[] = [];
  before(async () => {
    db = await TestDatabase.create();
    ({ app, locks } = await createLockApp(db.settings, { strategy: 'row-lock', janitor: false }));
    ({ sent } = spyOnDataSourceStatements(app.get(DataSource)));
  });
  after(async () => {
    await app?.close();
    await db?.drop();
  });

  async function count(call: () => Promise<unknown>): Promise<{ statements: string[]; libraryTrips: number }> {
    const from = sent.length;
    const trips = callerTrips(locks);
    await call();
    return {
      statements: sent.slice(from).map((sql) =>
        sql
          .replace(/^SET STATEMENT .*? FOR /s, '')
          .replace(/^CALL `(\w+)`\(.*$/s, 'CALL $1')
          .replace(/^(CALL \w+|\S+( INTO \S+)?).*$/s, '$1'),
      ),
      libraryTrips: callerTrips(locks) - trips,
    };
  }

  it('control: a key a row-lock writer used last: each reader hold is START, the locking read, the record-and-commit CALL; nothing on the library pool', async () => {
    await locks.withLock('writer-then-readers', () => undefined);
    const holds = [];
    for (let i = 0; i < 3; i++) holds.push(await count(() => locks.withLock('writer-then-readers', () => undefined, { mode: 'read' })));
    assert.deepEqual(
      holds.map((h) => [h.statements, h.libraryTrips]),
      holds.map(() => [['START', 'SELECT', 'CALL db_lock_record_and_commit_v1'], 0]),
    );
  });

  it('on a key a lease used, reader holds take the rare path with a CLAIMED row each until a row-lock writer takes the key; then none', async () => {
    await locks.withLock('lease-then-readers', () => undefined, { strategy: 'lease' });
    const reader = () => count(() => locks.withLock('lease-then-readers', () => undefined, { mode: 'read' }));
    const before = [await reader(), await reader()];
    const claimsBefore = (await db.claimRows('lease-then-readers')).length;
    await locks.withLock('lease-then-readers', () => undefined); // a row-lock writer checks the log once and marks the key
    const claimsAtWriter = (await db.claimRows('lease-then-readers')).length;
    const after = [await reader(), await reader()];
    assert.deepEqual(
      before.map((h) => h.libraryTrips > 0),
      [true, true],
      'each reader hold read the log on the library pool',
    );
    assert.equal(claimsBefore, 2, 'one CLAIMED row per reader hold');
    assert.deepEqual(
      after.map((h) => [h.statements, h.libraryTrips]),
      after.map(() => [['START', 'SELECT', 'CALL db_lock_record_and_commit_v1'], 0]),
    );
    assert.equal((await db.claimRows('lease-then-readers')).length, claimsAtWriter, 'no CLAIMED row for readers after the writer');
  });
});
