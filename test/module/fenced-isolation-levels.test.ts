import { randomUUID } from 'node:crypto';
import 'reflect-metadata';
import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import { DbLockError, type LockIsolationLevel, LockService, WriteLock } from '../../lib/index.js';
import { createLockApp } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';
import { createAccounts } from '../support/accounts.js';
import { contractSuite } from '../support/contract-targets.js';

/**
 * The fenced transaction's isolation level option, per strategy, is the one the transaction
 * really runs at (read from inside it: INNODB_TRX on MySQL/MariaDB, transaction_isolation on
 * PostgreSQL), the default is the documented one, the pooled connection is left at the session's
 * own level afterwards, and lockService.manager is refused (DbLockError) outside fenced work.
 */
const LEVELS: LockIsolationLevel[] = ['READ UNCOMMITTED', 'READ COMMITTED', 'REPEATABLE READ', 'SERIALIZABLE'];

contractSuite('fenced-decorators', 'fenced transaction isolation and lockService.manager', { postgres: true }, (target) => {
  const { strategy } = target;
  const postgres = target.database === 'postgres';
  let db: TestDatabase;
  let app: INestApplicationContext;
  let locks: LockService;

  before(async () => {
    db = await TestDatabase.forTarget(target);
    await createAccounts(db, [1, 2, 3]);
    ({ app, locks } = await createLockApp(db.settings, target.options()));
  });
  after(async () => {
    await app?.close();
    await db?.drop();
  });

  /**
   * The isolation level of the current transaction of the manager's connection, as the server
   * reports it, in MySQL's spelling ('READ COMMITTED'); 'none' if no transaction is open there.
   */
  async function levelInside(): Promise<string> {
    const manager = locks.manager;
    await manager.query('UPDATE account SET balance = balance WHERE id = 1');
    if (postgres) {
      // transaction_isolation outside a transaction is the session's default, so the level is
      // trusted only if the UPDATE's transaction id is still assigned: the same transaction is open.
      const [row] = (await manager.query(
        "SELECT current_setting('transaction_isolation') AS level, pg_current_xact_id_if_assigned()::text AS xid",
      )) as { level: string; xid: string | null }[];
      return row?.xid ? row.level.toUpperCase() : 'none';
    }
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

  // README: lease READ COMMITTED; row-lock the server's default, which is REPEATABLE READ on
  // MySQL/MariaDB and READ COMMITTED on PostgreSQL.
  it('the default is the documented one', async () => {
    const expected = strategy === 'lease' || postgres ? 'READ COMMITTED' : 'REPEATABLE READ';
    assert.equal(await probe.byDefault(), expected);
  });

  // PostgreSQL runs READ UNCOMMITTED as READ COMMITTED, but reports the level the transaction was
  // opened with: the named one is what it must show.
  for (const level of LEVELS)
    it(`isolationLevel '${level}' is the transaction's level`, async () => {
      assert.equal(await methods[level](level.replace(' ', '-')), level);
    });

  // Each server's session default: the level a pooled connection must be back at.
  it('the pooled connections keep their session level after calls that named one', async () => {
    for (let i = 0; i < 6; i++) await probe.ser(`s${i}`);
    const [sql, expected] = postgres
      ? ["SELECT current_setting('transaction_isolation') AS v", 'read committed']
      : ['SELECT @@SESSION.tx_isolation AS v', 'REPEATABLE-READ'];
    const rows = await locks.dataSource.query(sql);
    assert.equal((rows as { v: string }[])[0]!.v, expected);
  });

  it("lockService.manager outside any lock, and inside transaction: 'none', is a DbLockError", async () => {
    assert.throws(() => locks.manager, DbLockError);
    const got = await probe.none('n1');
    assert.ok(got instanceof DbLockError, `got ${String(got)}`);
  });
});
