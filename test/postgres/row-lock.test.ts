import 'reflect-metadata';
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { TypeOrmModule } from '@nestjs/typeorm';
import type { INestApplicationContext } from '@nestjs/common';
import { DbLockModule, type DbLockModuleOptions, LockLostError, LockService, LockTimeoutError, MAX_KEY_LENGTH, WriteLock } from '../../lib/index.js';
import { holdUntilReleased } from '../support/held-lock.js';
import { PgTestDatabase, pgTestsRun } from '../support/pg-test-database.js';

@Injectable()
class Accounts {
  constructor(readonly locks: LockService) {}

  @WriteLock('account:{0}', { strategy: 'row-lock' })
  async add(id: number, amount: number, fail = false): Promise<void> {
    await this.locks.manager.query(`UPDATE account SET balance = balance + ${amount} WHERE id = ${id}`);
    if (fail) throw new Error('the work failed');
  }
}

/**
 * The row-lock strategy on PostgreSQL inside one process: bounded waits (lock_timeout, so
 * sub-second budgets hold; NOWAIT for a single try), a killed connection, exact keys, the
 * decorator's fenced work with its audit row, and the janitor.
 */
describe('row-lock on PostgreSQL', { skip: (await pgTestsRun()) ? false : 'no PostgreSQL server' }, () => {
  let db: PgTestDatabase;
  let app: INestApplicationContext;
  let locks: LockService;

  async function boot(options: DbLockModuleOptions): Promise<INestApplicationContext> {
    @Module({ imports: [TypeOrmModule.forRoot({ ...db.options(), autoLoadEntities: true }), DbLockModule.forRoot(options)], providers: [Accounts] })
    class PgApp {}
    return NestFactory.createApplicationContext(PgApp, { logger: ['error'], abortOnError: false });
  }

  before(async () => {
    db = await PgTestDatabase.create('dblock_pg_rowlock');
    const dataSource = await db.dataSource();
    await dataSource.runMigrations();
    await dataSource.query('CREATE TABLE account (id int PRIMARY KEY, balance int NOT NULL)');
    app = await boot({ strategy: 'row-lock', escapedWrites: 'ignore', janitor: { logRetentionMs: 1 } });
    locks = app.get(LockService);
  });
  after(async () => {
    await app?.close();
    await db.drop();
  });

  /** Holds `key` until released; `value` is the holder's backend pid. */
  const hold = (key: string) =>
    holdUntilReleased(
      locks,
      key,
      {},
      async (handle) => ((await handle.manager!.query('SELECT pg_backend_pid() AS pid')) as { pid: number }[])[0]!.pid,
    );

  it('a sub-second budget holds (lock_timeout); a single try answers at once', async () => {
    const holder = await hold('busy');
    let started = performance.now();
    const timedOut = await locks.withLock('busy', async () => 'got in', { timeoutMs: 200 }).catch((error: unknown) => error);
    const waited = performance.now() - started;
    assert.ok(timedOut instanceof LockTimeoutError, String(timedOut));
    // Not before its budget; after it by at most a round trip or two and the retry's backoff (margin for a loaded 2-core host).
    assert.ok(waited >= 190 && waited < 1_500, `waited ${waited.toFixed(0)} ms for a 200 ms budget`);
    started = performance.now();
    const refused = await locks.withLock('busy', async () => 'got in', { timeoutMs: 0 }).catch((error: unknown) => error);
    assert.ok(refused instanceof LockTimeoutError);
    assert.ok(performance.now() - started < 1_000);
    holder.release();
    await holder.done;
    assert.equal(await locks.withLock('busy', async () => 'got in', { timeoutMs: 0 }), 'got in');
  });

  it("a killed connection ends the hold at once: the holder's work fails with LockLostError, a waiter gets in", async () => {
    const holder = await hold('killed');
    const waiter = locks.withLock('killed', async (handle) => handle.fencingToken, { timeoutMs: 5_000 });
    await db.query('SELECT pg_terminate_backend($1)', [holder.value]);
    const token = await waiter;
    assert.ok(token > 0);
    holder.release();
    await assert.rejects(holder.done, LockLostError);
  });

  it('keys are exact: case, trailing spaces, NUL and 764-byte keys are distinct locks (control: the same key twice is refused)', async () => {
    const keys = ['k', 'K', 'k ', 'k\u0000', '\u{1D11E}'.repeat(MAX_KEY_LENGTH)];
    const holds = await Promise.all(keys.map((key) => hold(key)));
    for (const key of keys)
      await assert.rejects(
        locks.withLock(key, async () => 0, { timeoutMs: 0 }),
        LockTimeoutError,
      );
    for (const h of holds) h.release();
    await Promise.all(holds.map((h) => h.done));
    const stored = await db.query<{ n: number }>(
      "SELECT count(DISTINCT lock_key)::int AS n FROM db_lock_log WHERE lock_key <> 'busy'::bytea AND lock_key <> 'killed'::bytea",
    );
    assert.ok(stored[0]!.n >= keys.length);
  });

  it("the decorator's work commits with its audit row, or neither: a failure rolls back and is logged FAILED", async () => {
    await db.query('INSERT INTO account VALUES (1, 0)');
    const accounts = app.get(Accounts);
    await accounts.add(1, 5);
    await assert.rejects(accounts.add(1, 100, true), /the work failed/);
    assert.equal((await db.query<{ balance: number }>('SELECT balance FROM account WHERE id = 1'))[0]!.balance, 5);
    const audit = async () =>
      (await db.query<{ status: string }>("SELECT status FROM db_lock_log WHERE lock_key = 'account:1'::bytea ORDER BY id")).map((r) => r.status);
    // The failed hold's row is written after its rollback, off the hold's path.
    const deadline = performance.now() + 5_000;
    while ((await audit()).length < 2 && performance.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    assert.deepEqual(await audit(), ['RELEASED', 'FAILED']);
  });

  it('the janitor runs and prunes ended audit rows past the retention', async () => {
    await locks.withLock('pruned', async () => undefined);
    await new Promise((r) => setTimeout(r, 20));
    const report = await locks.runJanitor();
    assert.equal(report.ran, true);
    assert.ok(report.pruned >= 1);
    assert.equal((await db.query("SELECT 1 FROM db_lock_log WHERE lock_key = 'pruned'::bytea")).length, 0);
  });
});
