import 'reflect-metadata';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Injectable } from '@nestjs/common';
import {
  DbLockAmbiguousDataSourceError,
  DbLockDataSourceNotFoundError,
  DbLockModule,
  getLockServiceToken,
  InjectLockService,
  LockService,
  WriteLock,
} from '../../lib/index.js';
import { bootApp } from '../support/boot-app.js';
import { TestDatabase } from '../support/test-database.js';

/**
 * One app, two TypeORM DataSources ('billing', 'reports'), a DbLockModule for each: the services
 * are injected by name, decorators name theirs (or use the only module when there is one), and a
 * module whose DataSource does not exist fails at bootstrap naming both.
 */
@Injectable()
class Reports {
  constructor(
    @InjectLockService('billing') readonly billing: LockService,
    @InjectLockService('reports') readonly reports: LockService,
  ) {}

  @WriteLock('run:{0}', { dataSourceName: 'reports' })
  async run(id: number): Promise<string> {
    return this.reports.currentLock!.keys[0]!;
  }

  @WriteLock('unnamed')
  async unnamed(): Promise<void> {}
}

/** Only a billing module: decorators naming no DataSource use it. */
@Injectable()
class Billing {
  constructor(@InjectLockService('billing') readonly billing: LockService) {}

  @WriteLock('invoice:{0}')
  async invoice(id: number): Promise<string> {
    return `${this.billing.dataSourceName}:${this.billing.currentLock!.keys[0]!}:${id}`;
  }
}

describe('named DataSources', () => {
  let billingDb: TestDatabase;
  let reportsDb: TestDatabase;
  before(async () => {
    billingDb = await TestDatabase.create('dblock_billing');
    reportsDb = await TestDatabase.create('dblock_reports');
  });
  after(async () => {
    await billingDb?.drop();
    await reportsDb?.drop();
  });

  const dataSources = () => [
    { name: 'billing', settings: billingDb.settings },
    { name: 'reports', settings: reportsDb.settings },
  ];

  it('each DbLockModule serves its own DataSource, injected with @InjectLockService(name)', async () => {
    const app = await bootApp(
      billingDb.settings,
      [DbLockModule.forRoot({ dataSourceName: 'billing' }), DbLockModule.forRoot({ dataSourceName: 'reports' })],
      { dataSources: dataSources(), providers: [Reports] },
    );
    try {
      const reports = app.get(Reports);
      assert.notEqual(reports.billing, reports.reports);
      assert.equal(reports.billing.dataSourceName, 'billing');
      assert.equal(reports.reports.dataSourceName, 'reports');
      assert.equal(getLockServiceToken('billing'), 'DbLockService:billing');
      assert.equal(app.get(getLockServiceToken('reports')), reports.reports);
      const lock = await reports.billing.acquire('shared-key');
      assert.equal((await billingDb.logRows('shared-key')).length, 1, "billing's lock is in billing's database");
      assert.equal((await reportsDb.logRows('shared-key')).length, 0);
      await lock.release();

      assert.equal(await reports.run(7), 'run:7');
      assert.equal((await reportsDb.logRows('run:7')).length, 1, 'the decorator naming reports used its module');
      assert.equal((await billingDb.logRows('run:7')).length, 0);

      await assert.rejects(reports.unnamed(), (error: unknown) => {
        assert.ok(error instanceof DbLockAmbiguousDataSourceError, String(error));
        assert.deepEqual(error.registeredNames, ['billing', 'reports']);
        assert.match(error.message, /'billing', 'reports'/);
        assert.match(error.message, /@WriteLock on Reports\.unnamed/);
        return true;
      });
    } finally {
      await app.close();
    }
  });

  it('with one DbLockModule, whatever its DataSource name, a decorator naming none uses it', async () => {
    const app = await bootApp(billingDb.settings, [DbLockModule.forRoot({ dataSourceName: 'billing' })], {
      dataSources: dataSources(),
      providers: [Billing],
    });
    try {
      assert.equal(await app.get(Billing).invoice(3), 'billing:invoice:3:3');
      assert.equal((await billingDb.logRows('invoice:3')).length, 1);
    } finally {
      await app.close();
    }
  });

  it('a DbLockModule for a DataSource the app does not have fails at bootstrap, naming both', async () => {
    // Process rows of the apps closed above may still be there (each goes at close only if nothing
    // live points to it, else the janitor reaps it): this boot must add none.
    const processRows = async () => (await billingDb.query<{ id: string }[]>('SELECT id FROM db_lock_process ORDER BY id')).map((r) => String(r.id));
    const before = await processRows();
    await assert.rejects(bootApp(billingDb.settings, [DbLockModule.forRoot({ dataSourceName: 'billing' })], { logger: false }), (error: unknown) => {
      assert.ok(error instanceof DbLockDataSourceNotFoundError, String(error));
      assert.equal(error.dataSourceName, 'billing');
      assert.deepEqual(error.availableNames, ['default']);
      assert.match(error.message, /registered for DataSource 'billing'.*DataSources found: 'default'/s);
      return true;
    });
    assert.deepEqual(await processRows(), before, 'no SQL was sent: no process lease');
  });

  // Each module locks in its own database: a key held through billing's service is not held for reports'.
  it("a nested lock through reports' service inside billing's withLock on the same key locks in reports' database", async () => {
    const app = await bootApp(
      billingDb.settings,
      [DbLockModule.forRoot({ dataSourceName: 'billing', janitor: false }), DbLockModule.forRoot({ dataSourceName: 'reports', janitor: false })],
      {
        dataSources: [
          { name: 'billing', settings: billingDb.settings },
          { name: 'reports', settings: reportsDb.settings },
        ],
        providers: [Reports],
      },
    );
    try {
      const { billing, reports } = app.get(Reports);
      // Negative control: outside billing's lock, reports' lock on the key writes reports' log row.
      await reports.withLock('k0', () => undefined);
      const control = (await reportsDb.logRows('k0')).length;
      let reportsRowsWhileHeld = -1;
      let reportsLive: boolean | undefined;
      await billing.withLock('k', async () => {
        await reports.withLock('k', async () => {
          reportsRowsWhileHeld = (await reportsDb.logRows('k')).length;
        });
        // A plain acquire through reports inside billing's lock: reports' database must show a live row for 'k'.
        const handle = await reports.acquire('k', { timeoutMs: 2_000 });
        reportsLive = (await reportsDb.logRows('k')).some((r) => r.status === 'ACQUIRED');
        await handle.release();
      });
      // reports.manager inside billing's row-lock (a fenced transaction of billing's DataSource) must not be billing's transaction.
      let reportsManagerIs = 'none';
      await billing.withLock(
        'm',
        async () => {
          try {
            const manager = reports.manager;
            reportsManagerIs = `an EntityManager of DataSource '${String((manager.connection.options as { name?: string }).name)}'`;
          } catch (e) {
            reportsManagerIs = (e as Error).name;
          }
        },
        { strategy: 'row-lock' },
      );
      console.log('# inside billing row-lock, reports.manager is', reportsManagerIs);
      assert.deepEqual(
        { control, reportsRowsWhileHeld, reportsHasLiveRowWhileHeld: reportsLive, reportsManagerIsBillings: reportsManagerIs.includes("'billing'") },
        { control: 1, reportsRowsWhileHeld: 1, reportsHasLiveRowWhileHeld: true, reportsManagerIsBillings: false },
      );
    } finally {
      await app.close();
    }
  });
});
