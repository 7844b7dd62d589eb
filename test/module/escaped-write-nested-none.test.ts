import 'reflect-metadata';
import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { Injectable } from '@nestjs/common';
import { getDataSourceToken, InjectDataSource, TypeOrmModule } from '@nestjs/typeorm';
import type { DataSource } from 'typeorm';
import { DbLockModule, type DbLockModuleOptions, EscapedWriteError, LockService, WriteLock } from '../../lib/index.js';
import { Account, balanceOf, CapturingLogger, createAccounts } from '../support/accounts.js';
import { bootLockApp } from '../support/boot-app.js';
import { TestDatabase } from '../support/test-database.js';
import { contractSuite } from '../support/contract-targets.js';
import { portableSql, typeOfQueryable } from '../support/portable-sql.js';

/**
 * A nested lock decorator with `transaction: 'none'` called inside a fenced call.
 * The outer fenced transaction stays open around it, so a write the nested call sends on another
 * connection of the DataSource escapes that fence exactly as it would from the outer method
 * itself: it commits even when the outer call rolls back, and if it touches a row the fence wrote
 * it waits for the fence's own row locks (a self-deadlock). The guard must see it.
 */
class BusinessError extends Error {}

@Injectable()
class Bank {
  constructor(
    readonly locks: LockService,
    @InjectDataSource() readonly dataSource: DataSource,
  ) {}

  /** A plain escaped write (what @InjectRepository would send). */
  async escapedWrite(id: number, balance: number): Promise<void> {
    const type = typeOfQueryable(this.dataSource);
    // Kept short so that the unguarded self-deadlock ends in seconds, not after the server's own bound
    // (innodb_lock_wait_timeout's 50 s on MySQL; none at all on PostgreSQL, whose lock_timeout is in ms).
    const setting = type === 'postgres' ? 'lock_timeout' : 'innodb_lock_wait_timeout';
    const runner = this.dataSource.createQueryRunner();
    try {
      await runner.connect();
      await runner.query(`SET SESSION ${setting} = ${type === 'postgres' ? 6_000 : 6}`);
      await runner.query(portableSql('UPDATE account SET balance = ? WHERE id = ?', type), [balance, id]);
    } finally {
      await runner.query(`SET SESSION ${setting} = DEFAULT`).catch(() => undefined);
      await runner.release();
    }
  }

  @WriteLock('side:{0}', { transaction: 'none' })
  async sideJob(id: number, balance: number): Promise<void> {
    await this.escapedWrite(id, balance);
  }

  /** Fenced: writes its row, then a nested 'none' call writes another row outside the fence, then fails. */
  @WriteLock('acct:{0}')
  async outerFails(id: number, other: number): Promise<void> {
    await this.locks.manager.update(Account, { id }, { balance: 1 });
    await this.sideJob(other, 999);
    throw new BusinessError('outer fails after the nested call');
  }

  /** Fenced: writes its row, then a nested 'none' call writes that same row on another connection. */
  @WriteLock('acct:{0}')
  async selfDeadlock(id: number): Promise<void> {
    await this.locks.manager.update(Account, { id }, { balance: 1 });
    await this.sideJob(id, 500);
  }

  /** Control: the same self-deadlock without the nested decorator. */
  @WriteLock('acct:{0}')
  async selfDeadlockDirect(id: number): Promise<void> {
    await this.locks.manager.update(Account, { id }, { balance: 1 });
    await this.escapedWrite(id, 500);
  }
}

async function outcome(call: Promise<unknown>): Promise<{ error: unknown; ms: number }> {
  const started = performance.now();
  const error = await call.then(
    () => undefined,
    (e: unknown) => e,
  );
  return { error, ms: Math.round(performance.now() - started) };
}

const describeError = (e: unknown) => (e instanceof Error ? `${e.constructor.name}: ${e.message.slice(0, 120)}` : String(e));

contractSuite('fenced-decorators', "a nested transaction: 'none' lock call inside a fenced call", { postgres: true }, (target) => {
  let db: TestDatabase;
  before(async () => {
    db = await TestDatabase.forTarget(target);
    await createAccounts(db, [1, 2, 3, 4, 5, 6]);
  });
  after(async () => {
    await db?.drop();
  });

  async function boot(options: DbLockModuleOptions) {
    const logger = new CapturingLogger();
    const { app } = await bootLockApp(db.settings, DbLockModule.forRoot(target.options(options)), {
      imports: [TypeOrmModule.forFeature([Account])],
      providers: [Bank],
      logger,
    });
    return { app, bank: app.get(Bank), logger, dataSource: app.get<DataSource>(getDataSourceToken()) };
  }

  it("control, 'warn': the self-deadlock from the fenced method itself is cut after 1 s with EscapedWriteError", { timeout: 30_000 }, async () => {
    const { app, bank } = await boot({});
    try {
      const { error, ms } = await outcome(bank.selfDeadlockDirect(1));
      assert.ok(error instanceof EscapedWriteError, `got ${describeError(error)} after ${ms} ms`);
      assert.ok(ms < 4_000, `after ${ms} ms`);
    } finally {
      await app.close();
    }
  });

  it(
    "'warn': the same self-deadlock from a nested transaction: 'none' lock call is cut after 1 s with EscapedWriteError too",
    { timeout: 30_000 },
    async () => {
      const { app, bank } = await boot({});
      try {
        const { error, ms } = await outcome(bank.selfDeadlock(2));
        assert.ok(
          error instanceof EscapedWriteError && ms < 4_000,
          `the nested call's write waited for the outer fenced transaction's own row lock: expected EscapedWriteError after about 1 s, ` +
            `got ${describeError(error)} after ${ms} ms (unchecked, it waits for the session's own lock wait bound)`,
        );
        assert.equal(await balanceOf(db, 2), 100);
      } finally {
        await app.close();
      }
    },
  );

  it(
    "'error': a write from a nested transaction: 'none' lock call inside a fenced call is refused; nothing commits when the outer call fails",
    { timeout: 30_000 },
    async () => {
      const { app, bank } = await boot({ escapedWrites: 'error' });
      try {
        const { error } = await outcome(bank.outerFails(3, 4));
        assert.equal(
          await balanceOf(db, 4),
          100,
          `the nested call's write on another connection committed although the enclosing fenced call failed (${describeError(error)}), under escapedWrites: 'error'`,
        );
        assert.ok(error instanceof EscapedWriteError, `got ${describeError(error)}`);
        assert.equal(await balanceOf(db, 3), 100);
      } finally {
        await app.close();
      }
    },
  );
});
