import 'reflect-metadata';
import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { Inject, Injectable } from '@nestjs/common';
import { getDataSourceToken } from '@nestjs/typeorm';
import { ClsPluginTransactional, TransactionHost } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { ClsModule } from 'nestjs-cls';
import { DbLockModule, WriteLock } from '../../lib/index.js';
import { CapturingLogger } from '../support/accounts.js';
import { bootLockApp } from '../support/boot-app.js';
import { TestDatabase } from '../support/test-database.js';
import { contractSuite } from '../support/contract-targets.js';
import { runSql, typeOfQueryable } from '../support/portable-sql.js';

/**
 * fenced-late-statements.test.ts through @nestjs-cls/transactional. A locked method runs two
 * writers with Promise.all; one fails fast, the call rolls back, and the other's next write
 * through txHost.tx (the fenced EntityManager) would be queued behind the ROLLBACK on the fenced
 * connection and commit on its own (autocommit), outside any lock: it must be refused.
 */
type TxHost = TransactionHost<TransactionalAdapterTypeOrm>;

/**
 * A text expression saying whether the statement ran inside an open transaction. It only explains
 * a failure (any row of the late write fails the test): MariaDB has @@in_transaction; PostgreSQL
 * has no such flag, and a statement on its own has no transaction id yet while its SELECT list is
 * evaluated (see fenced-late-statements.test.ts).
 */
const txLabel = (postgres: boolean, inTx: string, autocommit: string) =>
  postgres
    ? `CASE WHEN pg_current_xact_id_if_assigned() IS NULL THEN '${autocommit}' ELSE '${inTx}' END`
    : `IF(@@in_transaction, '${inTx}', '${autocommit}')`;

@Injectable()
class Service {
  late: Promise<unknown> | undefined;
  constructor(@Inject(TransactionHost) readonly txHost: TxHost) {}

  @WriteLock('cls-late:{0}')
  async failFast(k: string): Promise<void> {
    const slowWriter = async () => {
      const postgres = typeOfQueryable(this.txHost.tx) === 'postgres';
      await runSql(this.txHost.tx, postgres ? 'SELECT pg_sleep(0.2)' : 'SELECT SLEEP(0.2)');
      await runSql(this.txHost.tx, `INSERT INTO entry (k, what) SELECT ?, ${txLabel(postgres, 'in-tx', 'autocommit')}`, [k]);
    };
    this.late = slowWriter().then(
      () => 'written',
      (e: unknown) => e,
    );
    const failSoon = async () => {
      await new Promise((r) => setTimeout(r, 20));
      throw new Error('validation failed');
    };
    await Promise.all([failSoon(), this.late]);
  }
}

contractSuite('fenced-decorators', 'late writes through txHost.tx while the fenced call rolls back', { postgres: true }, (target) => {
  let db: TestDatabase;
  before(async () => {
    db = await TestDatabase.forTarget(target);
    await db.query(`CREATE TABLE entry (id ${db.sql.autoId}, k VARCHAR(32) NOT NULL, what VARCHAR(32) NOT NULL)${db.sql.tableOptions}`);
  });
  after(async () => {
    await db?.drop();
  });

  it(
    'Promise.all failing fast in a locked method: the sibling write through txHost.tx does not commit after the ROLLBACK',
    { timeout: 30_000 },
    async () => {
      const cls = ClsModule.forRoot({
        global: true,
        plugins: [new ClsPluginTransactional({ adapter: new TransactionalAdapterTypeOrm({ dataSourceToken: getDataSourceToken() }) })],
      });
      const { app } = await bootLockApp(db.settings, DbLockModule.forRoot(target.options({})), {
        imports: [cls],
        providers: [Service],
        logger: new CapturingLogger(),
      });
      try {
        const service = app.get(Service);
        await assert.rejects(service.failFast('x'), /validation failed/);
        const got = await service.late;
        const rows = (await db.query<{ what: string }[]>('SELECT what FROM entry WHERE k = ?', ['x'])).map((r) => r.what);
        assert.deepEqual(
          rows,
          [],
          `the locked call failed and was rolled back, yet its sibling's write through txHost.tx committed after the ROLLBACK ` +
            `(rows: ${JSON.stringify(rows)}; task answered ${got instanceof Error ? got.message : String(got)})`,
        );
      } finally {
        await app.close();
      }
    },
  );
});
