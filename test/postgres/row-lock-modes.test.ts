import 'reflect-metadata';
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Module } from '@nestjs/common';
import type { INestApplicationContext } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { TypeOrmModule } from '@nestjs/typeorm';
import type { EntityManager } from 'typeorm';
import { DbLockModule, type LockKeys, type LockOptions, LockService, LockTimeoutError } from '../../lib/index.js';
import { holdUntilReleased } from '../support/held-lock.js';
import { PgTestDatabase, pgTestsRun } from '../support/pg-test-database.js';

/**
 * Read/write, multi-key and nested (joined) takes of the row-lock strategy on PostgreSQL: readers
 * share (FOR SHARE), writers exclude both; several keys are taken all or none, in one order (no
 * deadlock between opposite orders); a take nested in a held call joins its transaction, and a
 * refused one leaves that transaction usable (it ran under a savepoint).
 */
describe('row-lock on PostgreSQL: modes, several keys, nested takes', { skip: (await pgTestsRun()) ? false : 'no PostgreSQL server' }, () => {
  let db: PgTestDatabase;
  let app: INestApplicationContext;
  let locks: LockService;

  before(async () => {
    db = await PgTestDatabase.create('dblock_pg_modes');
    const dataSource = await db.dataSource();
    await dataSource.runMigrations();
    await dataSource.query('CREATE TABLE note (id serial PRIMARY KEY, text varchar(40) NOT NULL)');
    @Module({
      imports: [
        TypeOrmModule.forRoot({ ...db.options(), autoLoadEntities: true }),
        DbLockModule.forRoot({ strategy: 'row-lock', escapedWrites: 'ignore' }),
      ],
    })
    class PgApp {}
    app = await NestFactory.createApplicationContext(PgApp, { logger: ['error'] });
    locks = app.get(LockService);
  });
  after(async () => {
    await app?.close();
    await db.drop();
  });

  const hold = (keys: LockKeys, options: LockOptions = {}) => holdUntilReleased(locks, keys, options);
  const oneTry = (keys: LockKeys, options: LockOptions = {}) =>
    locks
      .withLock(keys, async () => 'in', { ...options, timeoutMs: 0 })
      .catch((error: unknown) => (error instanceof LockTimeoutError ? 'refused' : Promise.reject(error)));
  const finish = async (...holds: { release: () => void; done: Promise<unknown> }[]) => {
    for (const h of holds) h.release();
    await Promise.all(holds.map((h) => h.done));
  };

  it('readers share a key; a writer is refused while they hold it, and a reader while a writer holds it', async () => {
    const reader = await hold('rw', { mode: 'read' });
    assert.equal(await oneTry('rw', { mode: 'read' }), 'in');
    assert.equal(await oneTry('rw'), 'refused');
    await finish(reader);
    const writer = await hold('rw');
    assert.equal(await oneTry('rw', { mode: 'read' }), 'refused');
    await finish(writer);
    assert.equal(await oneTry('rw'), 'in');
    // A key's later takes, a reader's too, are one statement on the business connection: nothing on the library's pool
    // (counted under 'locks'; the process lease and the janitor count apart).
    const before = locks.stats().roundTripsBy.locks;
    assert.equal(await oneTry('rw', { mode: 'read' }), 'in');
    assert.equal(await oneTry('rw'), 'in');
    assert.equal(locks.stats().roundTripsBy.locks - before, 0);
  });

  it('several keys are taken all or none: a refused multi-key take leaves its free keys free', async () => {
    const b = await hold('m:b');
    assert.equal(await oneTry(['m:a', 'm:b']), 'refused');
    assert.equal(await oneTry('m:a'), 'in', "the refused take kept 'm:a'");
    await finish(b);
    assert.equal(await oneTry(['m:a', 'm:b']), 'in');
  });

  it('opposite key orders never deadlock: 2 x 20 calls each way all finish, one holder at a time', async () => {
    let inside = 0;
    let most = 0;
    const section = async () => {
      most = Math.max(most, ++inside);
      await new Promise((r) => setTimeout(r, 1));
      inside--;
    };
    const calls = (keys: string[]) => Array.from({ length: 20 }, () => locks.withLock(keys, section, { timeoutMs: 30_000 }));
    await Promise.all([...calls(['o:x', 'o:y']), ...calls(['o:y', 'o:x']), ...calls(['o:x', 'o:y']), ...calls(['o:y', 'o:x'])]);
    assert.equal(most, 1);
  });

  it("a nested take joins the holder's transaction; a refused one leaves it usable, and the work commits", async () => {
    const other = await hold('n:busy');
    const outcome = await locks.withLock('n:outer', async (outer) => {
      await outer.manager!.query("INSERT INTO note (text) VALUES ('before')");
      const refused = await locks
        .withLock('n:busy', async () => 'in', { timeoutMs: 150 })
        .catch((e: unknown) => (e instanceof LockTimeoutError ? 'refused' : e));
      const pid = async (manager: EntityManager) => ((await manager.query('SELECT pg_backend_pid() AS pid')) as { pid: number }[])[0]!.pid;
      const outerPid = await pid(outer.manager!);
      const joined = await locks.withLock('n:free', async () => (await pid(locks.manager)) === outerPid, { timeoutMs: 0 });
      await outer.manager!.query("INSERT INTO note (text) VALUES ('after')");
      return { refused, joined };
    });
    assert.deepEqual(outcome, { refused: 'refused', joined: true });
    assert.deepEqual(
      (await db.query<{ text: string }>('SELECT text FROM note ORDER BY id')).map((r) => r.text),
      ['before', 'after'],
    );
    await finish(other);
    // The joined key ended with the outer commit.
    assert.equal(await oneTry('n:free'), 'in');
  });
});
