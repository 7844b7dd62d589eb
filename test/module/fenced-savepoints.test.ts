import 'reflect-metadata';
import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import { LockService, WriteLock } from '../../lib/index.js';
import { createLockApp, endedStatuses } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';
import { contractSuite } from '../support/contract-targets.js';
import { runSql } from '../support/portable-sql.js';

/**
 * A fenced method that opens a transaction on lockService.manager itself
 * (manager.transaction(): a savepoint inside the fenced transaction, TypeORM's SAVEPOINT typeorm_N
 * on both servers). A failed inner block rolls back to its savepoint only; everything commits with
 * the fence, and rolls back with it.
 */
contractSuite('fenced-decorators', 'manager.transaction() inside a fenced call', { postgres: true }, (target) => {
  let db: TestDatabase;
  let app: INestApplicationContext;
  let locks: LockService;

  before(async () => {
    db = await TestDatabase.forTarget(target);
    await db.query(`CREATE TABLE entry (id ${db.sql.autoId}, k VARCHAR(32) NOT NULL, what VARCHAR(32) NOT NULL)${db.sql.tableOptions}`);
    ({ app, locks } = await createLockApp(db.settings, target.options()));
  });
  after(async () => {
    await app?.close();
    await db?.drop();
  });

  const entries = async (k: string) => (await db.query<{ what: string }[]>('SELECT what FROM entry WHERE k = ? ORDER BY id', [k])).map((r) => r.what);
  const put = (k: string, what: string) => runSql(locks.manager, 'INSERT INTO entry (k, what) VALUES (?, ?)', [k, what]);

  class Probe {
    @WriteLock('sp:{0}')
    async nested(k: string, innerFails: boolean, outerFails: boolean): Promise<void> {
      await put(k, 'before');
      try {
        await locks.manager.transaction(async (m) => {
          await runSql(m, 'INSERT INTO entry (k, what) VALUES (?, ?)', [k, 'inner']);
          if (innerFails) throw new Error('inner fails');
        });
      } catch {
        // caught: the outer work goes on
      }
      await put(k, 'after');
      if (outerFails) throw new Error('outer fails');
    }
  }
  const probe = new Probe();

  it('inner block succeeds: everything commits with the fence', async () => {
    await probe.nested('a', false, false);
    assert.deepEqual(await entries('a'), ['before', 'inner', 'after']);
    assert.deepEqual(await endedStatuses(db, 'sp:a'), ['RELEASED']);
  });

  it('inner block fails and is caught: only it rolls back', async () => {
    await probe.nested('b', true, false);
    assert.deepEqual(await entries('b'), ['before', 'after']);
    assert.deepEqual(await endedStatuses(db, 'sp:b'), ['RELEASED']);
  });

  it('outer fails after a committed inner block: nothing commits, FAILED, key free', async () => {
    await assert.rejects(probe.nested('c', false, true), /outer fails/);
    assert.deepEqual(await entries('c'), []);
    assert.deepEqual(await endedStatuses(db, 'sp:c'), ['FAILED']);
    const again = await locks.tryAcquire('sp:c');
    assert.ok(again);
    await again.release();
  });
});
