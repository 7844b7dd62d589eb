import 'reflect-metadata';
import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { Injectable } from '@nestjs/common';
import { getDataSourceToken, InjectRepository, TypeOrmModule } from '@nestjs/typeorm';
import type { DataSource, Repository } from 'typeorm';
import { DbLockModule, type DbLockModuleOptions, EscapedWriteError, LockService, WriteLock } from '../../lib/index.js';
import { Account, balanceOf, CapturingLogger, createAccounts } from '../support/accounts.js';
import { bootLockApp } from '../support/boot-app.js';
import { eventually } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';
import { contractSuite } from '../support/contract-targets.js';

/**
 * Writes that escape the fenced transaction: an @InjectRepository repository writes through the
 * app's pool, outside the fence. Default 'warn': one warning per call site; a self-deadlock on the
 * fence's own row lock is cut after 1 s with EscapedWriteError. 'error': refused before sending.
 * 'ignore': today's behaviour, no check.
 */
class BusinessError extends Error {}

/** A session's row lock wait bound, and the server's default for new sessions (PostgreSQL: pg_settings' boot/config value). */
const LOCK_WAIT = {
  mysql: { session: 'SELECT @@SESSION.innodb_lock_wait_timeout AS v', server: 'SELECT @@GLOBAL.innodb_lock_wait_timeout AS v' },
  postgres: {
    session: "SELECT setting AS v FROM pg_settings WHERE name = 'lock_timeout'",
    server: "SELECT reset_val AS v FROM pg_settings WHERE name = 'lock_timeout'",
  },
};

@Injectable()
class Bank {
  constructor(
    readonly locks: LockService,
    @InjectRepository(Account) readonly repo: Repository<Account>,
  ) {}

  /** The reported case: the write commits through the injected repository although the method throws. */
  @WriteLock('acct:{0}')
  async escapeThenFail(id: number, balance: number): Promise<void> {
    await this.repo.update({ id }, { balance });
    throw new BusinessError('after the write');
  }

  /** Another call site with the same mistake: warned about separately. */
  @WriteLock('acct:{0}')
  async escapeElsewhere(id: number, balance: number): Promise<void> {
    await this.repo.update({ id }, { balance });
  }

  /** The self-deadlock: the fence writes the row first, then the injected repository waits for that row lock. */
  @WriteLock('acct:{0}')
  async fencedThenEscaped(id: number): Promise<void> {
    await this.locks.manager.update(Account, { id }, { balance: 1 });
    await this.repo.update({ id }, { balance: 500 });
  }

  /** Done right: writes through the fenced manager; reads through the repository are not writes. Row-lock grants are the library's own. */
  @WriteLock('acct:{0}')
  async inside(id: number, balance: number): Promise<void> {
    await this.locks.manager.getRepository(Account).update({ id }, { balance });
    await this.repo.findOneBy({ id });
    const rowLock = await this.locks.acquire(`side:${id}`, { strategy: 'row-lock' });
    await rowLock.release();
  }
}

contractSuite('fenced-decorators', 'writes that escape the fenced transaction', { postgres: true }, (target) => {
  let db: TestDatabase;
  before(async () => {
    db = await TestDatabase.forTarget(target);
    await createAccounts(db, [1, 2, 3, 4, 5, 6, 7, 8, 9]);
  });
  after(async () => {
    await db?.drop();
  });

  async function boot(options: DbLockModuleOptions) {
    const logger = new CapturingLogger();
    const { app, locks } = await bootLockApp(db.settings, DbLockModule.forRoot(target.options(options)), {
      imports: [TypeOrmModule.forFeature([Account])],
      providers: [Bank],
      logger,
    });
    return { app, locks, bank: app.get(Bank), logger, dataSource: app.get<DataSource>(getDataSourceToken()) };
  }

  it("default 'warn': the escaped write is logged once per call site, naming the place and the fix", async () => {
    const { app, bank, logger } = await boot({});
    try {
      await assert.rejects(bank.escapeThenFail(1, 500), BusinessError);
      // What the warning is about: the write committed although the fenced call rolled back.
      assert.equal(await balanceOf(db, 1), 500);
      const [warning, ...more] = logger.escaped();
      assert.equal(more.length, 0, logger.escaped().join('\n'));
      assert.match(warning!, /at Bank\.escapeThenFail \(.*escaped-writes\.test\.js:\d+:\d+\)/, warning);
      assert.match(warning!, db.type === 'postgres' ? /"UPDATE "account" SET "balance" = \$1/ : /"UPDATE `account` SET `balance` = \?/);
      assert.match(warning!, /DataSource 'default'/);
      assert.match(warning!, /lockService\.manager/);
      assert.match(warning!, /@nestjs-cls\/transactional/);
      await assert.rejects(bank.escapeThenFail(1, 600), BusinessError);
      assert.equal(logger.escaped().length, 1, 'the same call site is not logged twice');
      await bank.escapeElsewhere(2, 700);
      assert.equal(logger.escaped().length, 2, 'another call site is');
      assert.match(logger.escaped()[1]!, /Bank\.escapeElsewhere/);
    } finally {
      await app.close();
    }
  });

  it("'warn': writing the fence's own row through the repository fails in about 1 s with EscapedWriteError, not after the server's own lock wait bound", async () => {
    const { app, bank, locks, dataSource } = await boot({});
    try {
      const started = performance.now();
      const error = await bank.fencedThenEscaped(3).then(
        () => undefined,
        (e: unknown) => e,
      );
      const elapsed = performance.now() - started;
      assert.ok(error instanceof EscapedWriteError, `expected EscapedWriteError, got ${String(error)}`);
      assert.equal(error.reason, 'lock-wait');
      assert.match(error.message, /almost certainly waiting for them: a self-deadlock/);
      assert.match(error.callSite ?? '', /Bank\.fencedThenEscaped/);
      assert.ok(elapsed < 5_000, `failed after ${Math.round(elapsed)} ms`);
      assert.equal(await balanceOf(db, 3), 100, 'the fenced transaction rolled back, and the escaped write never happened');
      // A row-lock hold that rolled back gets its terminal row after the rollback, batched off the
      // caller's path: wait for it (the lease writes FAILED before the call returns).
      await eventually(async () => (await db.logRows('acct:3')).length > 0, 5_000, "acct:3's terminal log row");
      assert.deepEqual(
        (await db.logRows('acct:3')).map((r) => r.status),
        ['FAILED'],
      );
      const next = await locks.tryAcquire('acct:3');
      assert.ok(next, 'the lock is free at once');
      await next.release();
      // The bound was the escaped statement's only: every pooled connection is back to the server's value.
      const [global] = await db.query<{ v: unknown }[]>(db.type === 'postgres' ? LOCK_WAIT.postgres.server : LOCK_WAIT.mysql.server);
      const runners = Array.from({ length: 4 }, () => dataSource.createQueryRunner());
      try {
        for (const runner of runners) await runner.connect();
        for (const runner of runners) {
          const [row] = (await runner.query(db.type === 'postgres' ? LOCK_WAIT.postgres.session : LOCK_WAIT.mysql.session)) as { v: unknown }[];
          assert.equal(String(row!.v), String(global!.v));
        }
      } finally {
        for (const runner of runners) await runner.release();
      }
    } finally {
      await app.close();
    }
  });

  it('writes through lockService.manager, reads through the repository and row-lock grants inside a fenced call are not escapes', async () => {
    const { app, bank, logger } = await boot({});
    try {
      await bank.inside(4, 250);
      assert.equal(await balanceOf(db, 4), 250);
      assert.deepEqual(logger.escaped(), []);
    } finally {
      await app.close();
    }
  });

  it("'error': the escaped write is refused before it is sent; the self-deadlock fails at once", async () => {
    const { app, bank } = await boot({ escapedWrites: 'error' });
    try {
      await assert.rejects(bank.escapeThenFail(5, 500), (error: unknown) => {
        assert.ok(error instanceof EscapedWriteError, String(error));
        assert.equal(error.reason, 'escaped');
        assert.equal(error.dataSourceName, 'default');
        assert.match(error.message, /It was not sent \(escapedWrites: 'error'\)/);
        return true;
      });
      assert.equal(await balanceOf(db, 5), 100);
      const started = performance.now();
      await assert.rejects(bank.fencedThenEscaped(6), (error: unknown) => error instanceof EscapedWriteError && error.reason === 'escaped');
      assert.ok(performance.now() - started < 1_000, 'no lock wait at all');
      assert.equal(await balanceOf(db, 6), 100);
    } finally {
      await app.close();
    }
  });

  it("'ignore': no check (the write commits, nothing is logged), and no guard on the DataSource (only the rollback watch)", async () => {
    const { app, bank, logger, dataSource } = await boot({ escapedWrites: 'ignore' });
    try {
      assert.deepEqual(
        dataSource.subscribers.map((s) => s.constructor.name),
        ['FencedStatementWatch'],
      );
      await assert.rejects(bank.escapeThenFail(7, 500), BusinessError);
      assert.equal(await balanceOf(db, 7), 500);
      assert.deepEqual(logger.escaped(), []);
    } finally {
      await app.close();
    }
  });

  it('the guard (and the rollback watch) leave the DataSource with the module', async () => {
    const { app, dataSource } = await boot({});
    assert.equal(dataSource.subscribers.length, 2, 'installed at bootstrap');
    await app.close();
    assert.equal(dataSource.subscribers.length, 0, 'removed at shutdown');
  });
});
