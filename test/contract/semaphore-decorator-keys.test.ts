import 'reflect-metadata';
import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { Inject, Injectable } from '@nestjs/common';
import { getDataSourceToken, InjectRepository, TypeOrmModule } from '@nestjs/typeorm';
import { ClsPluginTransactional, Propagation, TransactionHost } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { ClsModule } from 'nestjs-cls';
import type { Repository } from 'typeorm';
import {
  DbLockError,
  DbLockModule,
  DistributedLock,
  EscapedWriteError,
  InvalidLockKeyError,
  LockService,
  Semaphore,
  SemaphoreLimitError,
  WriteLock,
} from '../../lib/index.js';
import { Account, balanceOf, CapturingLogger, createAccounts } from '../support/accounts.js';
import { bootLockApp } from '../support/boot-app.js';
import { endedStatuses } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';
import { callerTrips } from '../support/round-trips.js';
import { contractSuite } from '../support/contract-targets.js';

type TxHost = TransactionHost<TransactionalAdapterTypeOrm>;
class BusinessError extends Error {}
let db: TestDatabase;

@Injectable()
class Permits {
  constructor(
    @Inject(TransactionHost) readonly txHost: TxHost,
    readonly locks: LockService,
    @InjectRepository(Account) readonly repo: Repository<Account>,
  ) {}

  @Semaphore('sp:{0}', 2)
  async permit(id: number, balance: number, fail = false): Promise<number> {
    await this.locks.manager.getRepository(Account).update({ id }, { balance });
    if (fail) throw new BusinessError('permit failed');
    return this.locks.currentLock!.fencingToken;
  }

  @Semaphore('sp:{0}', 2)
  async permitReenter(id: number): Promise<boolean> {
    const before = callerTrips(this.locks);
    await this.permit(id, 5);
    return callerTrips(this.locks) === before;
  }

  @WriteLock('sp:{0}')
  async lockThenPermit(id: number): Promise<void> {
    await this.permit(id, 6);
  }

  @WriteLock('wl:{0}')
  async lockThenOtherPermit(id: number, fail: boolean): Promise<void> {
    await this.locks.manager.getRepository(Account).update({ id }, { balance: 7 });
    await this.permit(id + 1, 8);
    if (fail) throw new BusinessError('outer failed');
  }

  @Semaphore('sn:{0}', 1, { transaction: 'none' })
  async permitNone(id: number): Promise<unknown> {
    try {
      return this.locks.manager;
    } catch (error) {
      return error;
    }
  }

  @DistributedLock({ key: 'obj:{0.a.b}' })
  async nestedPath(arg: unknown): Promise<string> {
    return this.locks.currentLock!.keys[0]!;
  }

  @Semaphore('sk:{0}', 3)
  async permitKey(arg: unknown): Promise<string> {
    return this.locks.currentLock!.keys[0]!;
  }

  /** An escape through a RequiresNew cls transaction inside a locked method. */
  @WriteLock('esc:{0}')
  async escapeViaRequiresNew(id: number): Promise<void> {
    await this.txHost.withTransaction(Propagation.RequiresNew, async () => {
      await this.txHost.tx.getRepository(Account).update({ id }, { balance: 999 });
    });
  }

  @WriteLock('slow:{0}')
  async slowFenced(id: number, until: Promise<void>): Promise<void> {
    await this.locks.manager.getRepository(Account).update({ id }, { balance: 3 });
    await until;
  }
}

contractSuite('fenced-decorators', '@Semaphore fenced commits, key templates, escapes with cls', { postgres: true }, (target) => {
  before(async () => {
    db = await TestDatabase.forTarget(target);
    await createAccounts(
      db,
      Array.from({ length: 40 }, (_, i) => i + 1),
    );
  });
  after(async () => {
    await db?.drop();
  });

  async function boot(escapedWrites: 'warn' | 'error' = 'warn') {
    const logger = new CapturingLogger();
    const cls = ClsModule.forRoot({
      global: true,
      plugins: [new ClsPluginTransactional({ adapter: new TransactionalAdapterTypeOrm({ dataSourceToken: getDataSourceToken() }) })],
    });
    const { app, locks } = await bootLockApp(db.settings, DbLockModule.forRoot(target.options({ janitor: false, escapedWrites })), {
      imports: [cls, TypeOrmModule.forFeature([Account])],
      providers: [Permits],
      logger,
    });
    return { app, locks, permits: app.get(Permits), logger };
  }

  const ended = (key: string): Promise<unknown[]> => endedStatuses(db, key);

  it('@Semaphore: fenced commit, FAILED and rolled back on error, reentry free, lock-then-permit refused', async () => {
    const { app, permits, locks } = await boot();
    try {
      assert.ok((await permits.permit(1, 11)) >= 1);
      assert.equal(await balanceOf(db, 1), 11);
      await assert.rejects(permits.permit(2, 12, true), BusinessError);
      assert.equal(await balanceOf(db, 2), 100);
      assert.deepEqual(await ended('sp:2'), ['FAILED']);
      assert.equal(await permits.permitReenter(3), true, 'no round trip for the reentry');
      await assert.rejects(permits.lockThenPermit(4), SemaphoreLimitError);
      assert.equal(await balanceOf(db, 4), 100);
      const free = await locks.tryAcquire('sp:4');
      assert.ok(free, 'free after the refusal');
      await free.release();
    } finally {
      await app.close();
    }
  });

  it('a @Semaphore permit taken inside a fenced lock call joins it: ends with it, FAILED with it', async () => {
    const { app, permits } = await boot();
    try {
      await permits.lockThenOtherPermit(10, false);
      assert.equal(await balanceOf(db, 10), 7);
      assert.equal(await balanceOf(db, 11), 8);
      assert.deepEqual(await ended('sp:11'), ['RELEASED']);
      await assert.rejects(permits.lockThenOtherPermit(12, true), BusinessError);
      assert.equal(await balanceOf(db, 12), 100);
      assert.equal(await balanceOf(db, 13), 100);
      assert.deepEqual(await ended('sp:13'), ['FAILED']);
    } finally {
      await app.close();
    }
  });

  it("@Semaphore transaction 'none': no manager (DbLockError), the permit RELEASED", async () => {
    const { app, permits } = await boot();
    try {
      const got = await permits.permitNone(20);
      assert.ok(got instanceof DbLockError, `got ${(got as object)?.constructor?.name}`);
      assert.deepEqual(await ended('sn:20'), ['RELEASED']);
    } finally {
      await app.close();
    }
  });

  it('key templates with hostile values: InvalidLockKeyError, no round trip, nothing written', async () => {
    const { app, permits, locks } = await boot();
    try {
      assert.equal(await permits.nestedPath({ a: { b: 'x' } }), 'obj:x');
      assert.equal(await permits.permitKey(7n), 'sk:7');
      const rows = async () => (await db.query<unknown[]>("SELECT id FROM db_lock_log WHERE lock_key LIKE 'obj:%' OR lock_key LIKE 'sk:%'")).length;
      const rowsBefore = await rows();
      assert.ok(rowsBefore >= 2, `the two valid calls' holds are counted (${rowsBefore} rows)`);
      const trips = callerTrips(locks);
      const hostile: unknown[] = [
        undefined,
        null,
        {},
        { a: null },
        { a: { b: '' } },
        { a: { b: NaN } },
        { a: { b: Infinity } },
        { a: { b: { toString: () => 'evil' } } },
        { a: { b: 'x'.repeat(200) } },
        { a: { b: 'bad\uD800' } },
        { a: { b: true } },
        { a: { b: Symbol('s') } },
        { a: { b: ['x'] } },
      ];
      for (const arg of hostile) await assert.rejects(permits.nestedPath(arg), InvalidLockKeyError, String(JSON.stringify(arg)));
      for (const arg of [undefined, '', NaN, 'y'.repeat(200), '\uDC00', {}, [], () => 'k'])
        await assert.rejects(permits.permitKey(arg), InvalidLockKeyError, String(arg));
      assert.equal(callerTrips(locks), trips, 'no round trip');
      assert.equal(await rows(), rowsBefore, 'no row');
    } finally {
      await app.close();
    }
  });

  it("'error': a write in a RequiresNew cls transaction inside a locked method is refused; the call fails FAILED, nothing written", async () => {
    const { app, permits } = await boot('error');
    try {
      await assert.rejects(permits.escapeViaRequiresNew(30), EscapedWriteError);
      assert.equal(await balanceOf(db, 30), 100);
      assert.deepEqual(await ended('esc:30'), ['FAILED']);
    } finally {
      await app.close();
    }
  });

  it("'error': a write from another call chain while a fenced call is open is not refused (no leak across chains)", async () => {
    const { app, permits, logger } = await boot('error');
    try {
      let open!: () => void;
      const until = new Promise<void>((r) => (open = r));
      const fenced = permits.slowFenced(31, until);
      await new Promise((r) => setTimeout(r, 100));
      await permits.repo.update({ id: 32 }, { balance: 4 });
      open();
      await fenced;
      assert.equal(await balanceOf(db, 32), 4);
      assert.equal(await balanceOf(db, 31), 3);
      assert.deepEqual(logger.escaped(), []);
    } finally {
      await app.close();
    }
  });
});
