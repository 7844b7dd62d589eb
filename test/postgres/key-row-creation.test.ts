import 'reflect-metadata';
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { TypeOrmModule } from '@nestjs/typeorm';
import type { INestApplicationContext } from '@nestjs/common';
import { DbLockModule, LockService } from '../../lib/index.js';
import { createKeyRowsStatement } from '../../lib/store/postgres/pg-log-rows.sql.js';
import { holdUntilReleased } from '../support/held-lock.js';
import { PgTestDatabase, pgTestsRun } from '../support/pg-test-database.js';

/**
 * A key's row created on first use beside a row-lock holder of that key. Three processes firing one
 * job for the first time race to create its row: the one that created it holds it (its UPDATE
 * in an open transaction), and the others' creation must leave the row alone at once. A single try
 * that waited for the hold instead ran out of its answer bound and failed with
 * DbLockConnectionError where it should have answered busy ('skip').
 */
describe('key rows created beside a row-lock holder on PostgreSQL', { skip: (await pgTestsRun()) ? false : 'no PostgreSQL server' }, () => {
  let db: PgTestDatabase;
  let app: INestApplicationContext;
  let locks: LockService;

  before(async () => {
    db = await PgTestDatabase.create('dblock_pg_keyrows');
    await (await db.dataSource()).runMigrations();
    @Module({
      imports: [TypeOrmModule.forRoot({ ...db.options(), autoLoadEntities: true }), DbLockModule.forRoot({ strategy: 'row-lock', janitor: false })],
    })
    class PgApp {}
    app = await NestFactory.createApplicationContext(PgApp, { logger: ['error'], abortOnError: false });
    locks = app.get(LockService);
  });
  after(async () => {
    await app?.close();
    await db.drop();
  });

  /** Runs `sql` on a session of its own whose lock waits end after 1 s (55P03): the error code it met, if any. */
  const codeOf = (sql: string): Promise<string | undefined> =>
    db.query(`SET lock_timeout = '1s'; ${sql}`).then(
      () => undefined,
      (error: { code?: string }) => error.code ?? String(error),
    );

  it('the creation of a held key leaves its row alone at once; the same insert without its guard waits for the holder (control)', async () => {
    const key = 'first-use:job';
    const stored = Buffer.from(key); // the default namespace stores the key as it is
    const holder = await holdUntilReleased(locks, key);
    try {
      assert.equal(await codeOf(createKeyRowsStatement([stored])), undefined, 'the creation did not wait for the holder');
      // Control: the row is really held, and a plain ON CONFLICT DO NOTHING waits for it.
      const unguarded = createKeyRowsStatement([stored]).replace(/ WHERE NOT EXISTS \(.*?\) ON CONFLICT/, ' ON CONFLICT');
      assert.notEqual(unguarded, createKeyRowsStatement([stored]), 'the control removed the guard');
      assert.equal(await codeOf(unguarded), '55P03', 'the unguarded insert waited until its lock timeout');
    } finally {
      holder.release();
      await holder.done;
    }
    const rows = await db.query<{ n: string }>('SELECT count(*) AS n FROM db_lock WHERE lock_key = $1', [stored]);
    assert.equal(Number(rows[0]!.n), 1, 'one row for the key');
  });

  it('a missing key is still created by it', async () => {
    const stored = Buffer.from('first-use:new');
    assert.equal(await codeOf(createKeyRowsStatement([stored])), undefined);
    const rows = await db.query<{ n: string }>('SELECT count(*) AS n FROM db_lock WHERE lock_key = $1', [stored]);
    assert.equal(Number(rows[0]!.n), 1);
  });
});
