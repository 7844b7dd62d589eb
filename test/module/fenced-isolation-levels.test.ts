import { randomUUID } from 'node:crypto';
import 'reflect-metadata';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import { DbLockError, type LockIsolationLevel, LockService, type LockStrategyName, WriteLock } from '../../lib/index.js';
import { createLockApp } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';
import { createAccounts } from '../support/accounts.js';

/**
 * The fenced transaction's isolation level option, per strategy, is the one the
 * transaction really runs at (read in INNODB_TRX from inside it), the default is the documented
 * one, the pooled connection is left at the session's own level afterwards, and
 * lockService.manager is refused (DbLockError) outside fenced work.
 */
const LEVELS: LockIsolationLevel[] = ['READ UNCOMMITTED', 'READ COMMITTED', 'REPEATABLE READ', 'SERIALIZABLE'];

for (const strategy of ['lease', 'row-lock'] as LockStrategyName[]) {
  describe(`fenced transaction isolation and lockService.manager (${strategy})`, () => {
    let db: TestDatabase;
    let app: INestApplicationContext;
    let locks: LockService;

    before(async () => {
      db = await TestDatabase.create();
      await createAccounts(db, [1, 2, 3]);
      ({ app, locks } = await createLockApp(db.settings, { strategy }));
    });
    after(async () => {
      await app?.close();
      await db?.drop();
    });

    /** The isolation level of the current transaction of the manager's connection, as InnoDB reports it. */
    async function levelInside(): Promise<string> {
      const manager = locks.manager;
      await manager.query('UPDATE account SET balance = balance WHERE id = 1');
      // INNODB_TRX comes from a server-wide cache, refreshed only when nobody read it for 100 ms
      // (other test files read it too): a row is trusted only if it shows this very read as the
      // transaction's running statement, which a refresh during this read does.
      const marker = `level-probe-${randomUUID()}`;
      for (let tries = 0; tries < 40; tries++) {
        await new Promise((r) => setTimeout(r, 150));
        const rows = (await manager.query(
          `SELECT /* ${marker} */ trx_isolation_level AS level FROM information_schema.INNODB_TRX WHERE trx_mysql_thread_id = CONNECTION_ID() AND trx_query LIKE ?`,
          [`%${marker}%`],
        )) as { level: string }[];
        if (rows.length > 0) return rows[0]!.level;
      }
      return 'none';
    }

    class Probe {
      @WriteLock('iso:default')
      async byDefault(): Promise<string> {
        return levelInside();
      }
      @WriteLock('iso:{0}', { isolationLevel: 'READ UNCOMMITTED' })
      async ru(_k: string): Promise<string> {
        return levelInside();
      }
      @WriteLock('iso:{0}', { isolationLevel: 'READ COMMITTED' })
      async rc(_k: string): Promise<string> {
        return levelInside();
      }
      @WriteLock('iso:{0}', { isolationLevel: 'REPEATABLE READ' })
      async rr(_k: string): Promise<string> {
        return levelInside();
      }
      @WriteLock('iso:{0}', { isolationLevel: 'SERIALIZABLE' })
      async ser(_k: string): Promise<string> {
        return levelInside();
      }
      @WriteLock('none:{0}', { transaction: 'none' })
      async none(_k: string): Promise<unknown> {
        try {
          return locks.manager;
        } catch (error) {
          return error;
        }
      }
    }
    const probe = new Probe();
    const methods: Record<LockIsolationLevel, (k: string) => Promise<string>> = {
      'READ UNCOMMITTED': (k) => probe.ru(k),
      'READ COMMITTED': (k) => probe.rc(k),
      'REPEATABLE READ': (k) => probe.rr(k),
      SERIALIZABLE: (k) => probe.ser(k),
    };

    it('the default is the documented one', async () => {
      const expected = strategy === 'lease' ? 'READ COMMITTED' : 'REPEATABLE READ';
      assert.equal(await probe.byDefault(), expected);
    });

    for (const level of LEVELS)
      it(`isolationLevel '${level}' is the transaction's level`, async () => {
        assert.equal(await methods[level](level.replace(' ', '-')), level);
      });

    it('the pooled connections keep their session level after calls that named one', async () => {
      for (let i = 0; i < 6; i++) await probe.ser(`s${i}`);
      const rows = await locks.dataSource.query('SELECT @@SESSION.tx_isolation AS v');
      assert.equal((rows as { v: string }[])[0]!.v, 'REPEATABLE-READ');
    });

    it("lockService.manager outside any lock, and inside transaction: 'none', is a DbLockError", async () => {
      assert.throws(() => locks.manager, DbLockError);
      const got = await probe.none('n1');
      assert.ok(got instanceof DbLockError, `got ${String(got)}`);
    });
  });
}
