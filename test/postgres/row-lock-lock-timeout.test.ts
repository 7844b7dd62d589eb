import 'reflect-metadata';
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { TypeOrmModule } from '@nestjs/typeorm';
import type { INestApplicationContext } from '@nestjs/common';
import { DbLockModule, LockService, type RunLockedOptions } from '../../lib/index.js';
import { PgTestDatabase, pgTestsRun } from '../support/pg-test-database.js';

/** The app's own lock_timeout, set on every connection of its pool at connect. */
const APP_LOCK_TIMEOUT = '4321ms';
/** The take's budget: the bound its statements run under, which must not outlive them. */
const BUDGET_MS = 5_000;

/**
 * A row-lock take on PostgreSQL waits under `lock_timeout` set to what is left of the caller's
 * budget, for its own statements only: the work inside the hold runs under the app's setting,
 * whichever way the key was taken (the common one-statement take, which puts the setting back in
 * its UPDATE's answer; a first use; a key a lease held before, whose take goes on to the rare path
 * in the same transaction; readers, several keys, a single try, a take joining an open call).
 */
describe('row-lock on PostgreSQL: the work keeps the app lock_timeout', { skip: (await pgTestsRun()) ? false : 'no PostgreSQL server' }, () => {
  let db: PgTestDatabase;
  let app: INestApplicationContext;
  let locks: LockService;

  before(async () => {
    db = await PgTestDatabase.create('dblock_pg_lock_timeout');
    await (await db.dataSource()).runMigrations();
    @Module({
      imports: [
        TypeOrmModule.forRoot({ ...db.options(), autoLoadEntities: true, extra: { options: `-c lock_timeout=${APP_LOCK_TIMEOUT}` } }),
        DbLockModule.forRoot({ escapedWrites: 'ignore', janitor: { intervalMs: 3_600_000 } }),
      ],
    })
    class PgApp {}
    app = await NestFactory.createApplicationContext(PgApp, { logger: ['error'], abortOnError: false });
    locks = app.get(LockService);
  });
  after(async () => {
    await app?.close();
    await db.drop();
  });

  const setting = async (): Promise<string> => ((await locks.manager.query("SELECT current_setting('lock_timeout') AS t")) as { t: string }[])[0]!.t;
  /** The lock_timeout the work of a row-lock hold of `key` sees. */
  const seenInside = (key: string | string[], options: RunLockedOptions = {}) =>
    locks.runLocked(key, setting, { strategy: 'row-lock', timeoutMs: BUDGET_MS, ...options });

  it("the app's setting reaches the library's transactions (the check below can see a bound left behind)", async () => {
    assert.equal(await locks.runLocked('control', setting, { strategy: 'lease' }), APP_LOCK_TIMEOUT);
  });

  it('a first use, then the common take', async () => {
    assert.equal(await seenInside('common'), APP_LOCK_TIMEOUT, 'first use (the key row created, the take sent again)');
    assert.equal(await seenInside('common'), APP_LOCK_TIMEOUT, 'the common take');
  });

  it('a key a lease held before: the rare path in the same transaction', async () => {
    await locks.withLock('after-lease', async () => undefined, { strategy: 'lease' });
    const [row] = await db.query<{ n: number }>("SELECT no_lease_holders::int AS n FROM db_lock WHERE lock_key = convert_to('after-lease', 'UTF8')");
    assert.equal(row?.n, 0, 'the key row says a lease holder may be live, so the common take finds nothing to bump');
    assert.equal(await seenInside('after-lease'), APP_LOCK_TIMEOUT);
    assert.equal(await seenInside('after-lease'), APP_LOCK_TIMEOUT, 'the common take after it');
  });

  it('readers, several keys, a single try', async () => {
    await seenInside('reader');
    assert.equal(await seenInside('reader', { mode: 'read' }), APP_LOCK_TIMEOUT, 'a reader');
    await seenInside(['multi:a', 'multi:b']);
    assert.equal(await seenInside(['multi:a', 'multi:b']), APP_LOCK_TIMEOUT, 'two keys');
    assert.equal(await seenInside('common', { timeoutMs: 0 }), APP_LOCK_TIMEOUT, 'a single try');
  });

  it('a take joining an open call, common and after a lease', async () => {
    await seenInside('joined');
    await locks.withLock('joined-after-lease', async () => undefined, { strategy: 'lease' });
    const seen = await locks.runLocked(
      'outer',
      async () => [await seenInside('joined'), await setting(), await seenInside('joined-after-lease'), await setting()],
      { strategy: 'row-lock', timeoutMs: BUDGET_MS },
    );
    assert.deepEqual(seen, [APP_LOCK_TIMEOUT, APP_LOCK_TIMEOUT, APP_LOCK_TIMEOUT, APP_LOCK_TIMEOUT]);
  });
});
