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

/**
 * fenced-late-statements.test.ts through @nestjs-cls/transactional. A locked method runs two
 * writers with Promise.all; one fails fast, the call rolls back, and the other's next write
 * through txHost.tx (the fenced EntityManager) would be queued behind the ROLLBACK on the fenced
 * connection and commit on its own (autocommit), outside any lock: it must be refused.
 */
type TxHost = TransactionHost<TransactionalAdapterTypeOrm>;

@Injectable()
class Service {
  late: Promise<unknown> | undefined;
  constructor(@Inject(TransactionHost) readonly txHost: TxHost) {}

  @WriteLock('cls-late:{0}')
  async failFast(k: string): Promise<void> {
    const slowWriter = async () => {
      await this.txHost.tx.query('SELECT SLEEP(0.2)');
      await this.txHost.tx.query(`INSERT INTO entry (k, what) SELECT ?, IF(@@in_transaction, 'in-tx', 'autocommit')`, [k]);
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

let db: TestDatabase;
before(async () => {
  db = await TestDatabase.create();
  await db.query('CREATE TABLE entry (id INT AUTO_INCREMENT PRIMARY KEY, k VARCHAR(32) NOT NULL, what VARCHAR(32) NOT NULL) ENGINE=InnoDB');
});
after(async () => {
  await db?.drop();
});

it('Promise.all failing fast in a locked method: the sibling write through txHost.tx does not commit after the ROLLBACK', async () => {
  const cls = ClsModule.forRoot({
    global: true,
    plugins: [new ClsPluginTransactional({ adapter: new TransactionalAdapterTypeOrm({ dataSourceToken: getDataSourceToken() }) })],
  });
  const { app } = await bootLockApp(db.settings, DbLockModule.forRoot({}), { imports: [cls], providers: [Service], logger: new CapturingLogger() });
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
});
