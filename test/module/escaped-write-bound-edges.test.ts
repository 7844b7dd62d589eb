import 'reflect-metadata';
import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { Injectable } from '@nestjs/common';
import { getDataSourceToken, InjectDataSource, InjectRepository, TypeOrmModule } from '@nestjs/typeorm';
import type { DataSource, Repository } from 'typeorm';
import { DbLockModule, type DbLockModuleOptions, EscapedWriteError, LockService, WriteLock } from '../../lib/index.js';
import { Account, balanceOf, CapturingLogger, createAccounts } from '../support/accounts.js';
import { bootLockApp } from '../support/boot-app.js';
import { TestDatabase } from '../support/test-database.js';
import { contractSuite } from '../support/contract-targets.js';
import { runSql } from '../support/portable-sql.js';

/**
 * The escaped-write guard's edges. The 'warn' bound on an escaped write's session (the session's
 * lock wait lowered to 1 s, restored after the statement: innodb_lock_wait_timeout on MySQL,
 * lock_timeout on PostgreSQL) must never outlive the statement on a pooled connection; 'error'
 * refuses every business write sent outside the fence.
 */
class Refused extends Error {}

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
    @InjectDataSource() readonly dataSource: DataSource,
  ) {}

  /** The fence writes a row (so escaped writes are bounded), then an escaped write that another subscriber refuses before it is sent. */
  @WriteLock('acct:{0}')
  async fencedThenRefusedEscape(id: number, other: number): Promise<string> {
    await this.locks.manager.update(Account, { id }, { balance: 1 });
    try {
      await runSql(this.dataSource, 'UPDATE account SET balance = 2 WHERE id = ? /* refuse-me */', [other]);
      return 'sent';
    } catch (error) {
      return error instanceof Refused ? 'refused' : `other: ${String(error)}`;
    }
  }

  /** An escaped business write whose text happens to name a library table (in a string value). */
  @WriteLock('acct:{0}')
  async escapeMentioningLibraryTable(id: number): Promise<void> {
    await runSql(this.dataSource, `UPDATE account SET balance = 777 WHERE id = ? AND 'see db_lock_log' <> ''`, [id]);
  }

  /** The fence writes a row, then the method's own transaction on the DataSource writes two other rows at once (Promise.all). */
  @WriteLock('acct:{0}')
  async fencedThenConcurrentEscapes(id: number, a: number, b: number): Promise<void> {
    await this.locks.manager.update(Account, { id }, { balance: 1 });
    await this.dataSource.transaction(async (manager) => {
      await Promise.all([manager.update(Account, { id: a }, { balance: 41 }), manager.update(Account, { id: b }, { balance: 42 })]);
    });
  }

  /** The self-deadlock, with a second (harmless) escaped write of the same shape sent at once on the same connection. */
  @WriteLock('acct:{0}')
  async selfDeadlockBesideAnother(id: number, other: number): Promise<void> {
    await this.locks.manager.update(Account, { id }, { balance: 1 });
    await this.dataSource.transaction(async (manager) => {
      await Promise.all([manager.update(Account, { id: other }, { balance: 43 }), manager.update(Account, { id }, { balance: 44 })]);
    });
  }

  /** An escaped write inside a transaction the method opens itself on the DataSource. */
  @WriteLock('acct:{0}')
  async escapeInOwnTransaction(id: number): Promise<void> {
    await this.dataSource.transaction(async (manager) => {
      await manager.update(Account, { id }, { balance: 333 });
    });
  }
}

contractSuite('fenced-decorators', "the escaped-write guard's edges", { postgres: true }, (target) => {
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

  const lockWait = () => (db.type === 'postgres' ? LOCK_WAIT.postgres : LOCK_WAIT.mysql);

  /** The server's lock wait for new sessions, as text (PostgreSQL reports lock_timeout in ms, 0 for none). */
  async function serverLockWait(): Promise<string> {
    const [row] = await db.query<{ v: unknown }[]>(lockWait().server);
    return String(row!.v);
  }

  /** The lock wait of every connection of the DataSource's pool (bootLockApp's pool holds 4), as text. */
  async function poolLockWaits(dataSource: DataSource): Promise<string[]> {
    const runners = Array.from({ length: 4 }, () => dataSource.createQueryRunner());
    try {
      for (const runner of runners) await runner.connect();
      const values: string[] = [];
      for (const runner of runners) {
        const [row] = (await runner.query(lockWait().session)) as { v: unknown }[];
        values.push(String(row!.v));
      }
      return values;
    } finally {
      for (const runner of runners) await runner.release();
    }
  }

  it(
    "'warn': an escaped write refused by another (async) subscriber before it is sent leaves no pooled connection with the 1 s lock wait",
    { timeout: 30_000 },
    async () => {
      const { app, bank, dataSource } = await boot({});
      // An app's own async subscriber (registered with the DataSource, so before the library's guard) that refuses some statements.
      const refuser = {
        beforeQuery(event: { query: string }): Promise<void> | void {
          if (event.query.includes('refuse-me')) return Promise.reject(new Refused('refused by the app'));
        },
      };
      dataSource.subscribers.unshift(refuser as never);
      try {
        const global = await serverLockWait();
        assert.equal(await bank.fencedThenRefusedEscape(1, 2), 'refused');
        assert.equal(await balanceOf(db, 1), 1, 'the fenced write committed');
        assert.equal(await balanceOf(db, 2), 100, 'the refused write was not sent');
        const waits = await poolLockWaits(dataSource);
        assert.deepEqual(
          waits,
          waits.map(() => global),
          `a pooled connection kept the 1 s lock wait after the escaped write it was lowered for was never sent ` +
            `(the guard's bound is restored only in afterQuery, which TypeORM never calls then): ${JSON.stringify(waits)}`,
        );
      } finally {
        dataSource.subscribers.splice(dataSource.subscribers.indexOf(refuser as never), 1);
        await app.close();
      }
    },
  );

  it("'error': an escaped business write is refused even if its text names a library table", { timeout: 30_000 }, async () => {
    const { app, bank } = await boot({ escapedWrites: 'error' });
    try {
      const error = await bank.escapeMentioningLibraryTable(3).then(
        () => undefined,
        (e: unknown) => e,
      );
      assert.equal(await balanceOf(db, 3), 100, "an escaped UPDATE of the business table 'account' committed under escapedWrites: 'error'");
      assert.ok(error instanceof EscapedWriteError, `expected EscapedWriteError, got ${String(error)}`);
    } finally {
      await app.close();
    }
  });

  it(
    "'error': an escaped write in the method's own dataSource.transaction() is refused, that transaction rolled back, nothing left open",
    { timeout: 30_000 },
    async () => {
      const { app, bank, locks } = await boot({ escapedWrites: 'error' });
      try {
        await assert.rejects(bank.escapeInOwnTransaction(4), (e: unknown) => e instanceof EscapedWriteError && e.reason === 'escaped');
        assert.equal(await balanceOf(db, 4), 100);
        const open = await db.transactionsUntil((them) => them.length === 0);
        assert.equal(open.length, 0, `transactions left open: ${open.map((t) => t.text).join('\n')}`);
        const next = await locks.tryAcquire('acct:4');
        assert.ok(next, 'the key is free');
        await next.release();
      } finally {
        await app.close();
      }
    },
  );

  it(
    "'warn': the self-deadlock through the method's own dataSource.transaction() fails fast with EscapedWriteError",
    { timeout: 30_000 },
    async () => {
      const { app, bank, locks } = await boot({});
      try {
        class Probe {
          constructor(
            readonly l: LockService,
            readonly ds: DataSource,
          ) {}
          @WriteLock('acct:{0}')
          async run(id: number): Promise<void> {
            await this.l.manager.update(Account, { id }, { balance: 5 });
            await this.ds.transaction(async (manager) => {
              await manager.update(Account, { id }, { balance: 6 });
            });
          }
        }
        const started = performance.now();
        const error = await new Probe(locks, bank.dataSource).run(5).then(
          () => undefined,
          (e: unknown) => e,
        );
        assert.ok(error instanceof EscapedWriteError, `expected EscapedWriteError, got ${String(error)}`);
        assert.equal(error.reason, 'lock-wait');
        assert.ok(performance.now() - started < 5_000);
        assert.equal(await balanceOf(db, 5), 100);
      } finally {
        await app.close();
      }
    },
  );

  it(
    "'warn': two escaped writes sent at once on one connection (Promise.all in the method's own transaction) leave its lock wait as it was",
    { timeout: 30_000 },
    async () => {
      const { app, bank, dataSource } = await boot({});
      try {
        const global = await serverLockWait();
        await bank.fencedThenConcurrentEscapes(6, 7, 8);
        assert.equal(await balanceOf(db, 7), 41);
        assert.equal(await balanceOf(db, 8), 42);
        const waits = await poolLockWaits(dataSource);
        assert.deepEqual(
          waits,
          waits.map(() => global),
          `a pooled connection kept the 1 s lock wait after two escaped writes were bounded at once on it ` +
            `(the second bound saved the first one's 1 s as the value to restore): ${JSON.stringify(waits)}`,
        );
      } finally {
        await app.close();
      }
    },
  );

  it(
    "'warn': the self-deadlock sent beside another escaped write on the same connection still fails with EscapedWriteError, not a driver error",
    { timeout: 30_000 },
    async () => {
      const { app, bank } = await boot({});
      try {
        const started = performance.now();
        const error = await bank.selfDeadlockBesideAnother(9, 2).then(
          () => undefined,
          (e: unknown) => e,
        );
        const ms = Math.round(performance.now() - started);
        assert.ok(
          error instanceof EscapedWriteError,
          `expected EscapedWriteError (reason 'lock-wait') after about 1 s, got ${error instanceof Error ? `${error.constructor.name}: ${error.message.slice(0, 100)}` : String(error)} after ${ms} ms`,
        );
        assert.equal(await balanceOf(db, 9), 100);
      } finally {
        await app.close();
      }
    },
  );
});
