import 'reflect-metadata';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Injectable } from '@nestjs/common';
import { DbLockModule, InjectLockService, LockService } from '../../lib/index.js';
import { bootApp } from '../support/boot-app.js';
import { TestDatabase } from '../support/test-database.js';

@Injectable()
class Both {
  constructor(
    @InjectLockService('billing') readonly billing: LockService,
    @InjectLockService('reports') readonly reports: LockService,
  ) {}
}

/**
 * README "named DataSources: one DbLockModule per DataSource": each module locks in its own database.
 * A key held through billing's LockService must not make a nested acquisition of the same key
 * through reports' LockService reentrant: reports' database must get its own lock (a log row, a token).
 */
describe('reentrancy does not cross DbLockModules of different DataSources', () => {
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

  it("a nested lock through reports' service inside billing's withLock on the same key locks in reports' database", async () => {
    const app = await bootApp(
      billingDb.settings,
      [DbLockModule.forRoot({ dataSourceName: 'billing', janitor: false }), DbLockModule.forRoot({ dataSourceName: 'reports', janitor: false })],
      {
        dataSources: [
          { name: 'billing', settings: billingDb.settings },
          { name: 'reports', settings: reportsDb.settings },
        ],
        providers: [Both],
      },
    );
    try {
      const { billing, reports } = app.get(Both);
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
