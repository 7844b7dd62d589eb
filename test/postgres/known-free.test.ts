import 'reflect-metadata';
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Module } from '@nestjs/common';
import type { INestApplicationContext } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { TypeOrmModule } from '@nestjs/typeorm';
import { DbLockModule, LockService } from '../../lib/index.js';
import { partsOf } from '../support/lock-internals.js';
import { PgTestDatabase, pgTestsRun } from '../support/pg-test-database.js';

/**
 * On PostgreSQL a process that held a key alone and ended it durably grants it next in one
 * statement: the key row's token bumped only while it is still the one that process left, the log
 * row inserted from it. What must hold: that statement is what the grant sent (else these tests
 * prove nothing), and any grant by anyone since (a lease holder of another process, a row-lock
 * writer that committed, a row-lock reader still open) makes it refuse or wait exactly as the full
 * grant would, with nothing written, and the tokens keep growing.
 */
describe('grants of a key this process knows to be free, on PostgreSQL', { skip: (await pgTestsRun()) ? false : 'no PostgreSQL server' }, () => {
  let db: PgTestDatabase;
  const apps: INestApplicationContext[] = [];
  let mine: LockService;
  let theirs: LockService;
  const sent: string[] = [];
  /** The one-statement grant, and the token it tests. */
  const knownFreeGrant = /UPDATE db_lock l SET fencing_token = l\.fencing_token \+ 1.* AND l\.fencing_token = (\d+)/;
  /** The grant batches `mine` sent since the last call. */
  const grantsSent = () => sent.splice(0).filter((sql) => sql.startsWith('BEGIN ISOLATION LEVEL READ COMMITTED'));
  const liveRows = async (key: string) =>
    Number(
      (
        await db.query<{ n: string }>(
          "SELECT count(*) AS n FROM db_lock_log WHERE lock_key = $1::text::bytea AND status IN ('ACQUIRED', 'COMPLETED')",
          [key],
        )
      )[0]!.n,
    );

  async function boot(): Promise<LockService> {
    @Module({
      imports: [
        TypeOrmModule.forRoot({ ...db.options(), autoLoadEntities: true }),
        DbLockModule.forRoot({ escapedWrites: 'ignore', janitor: false }),
      ],
    })
    class PgApp {}
    const app = await NestFactory.createApplicationContext(PgApp, { logger: ['error'] });
    apps.push(app);
    return app.get(LockService);
  }

  before(async () => {
    db = await PgTestDatabase.create('dblock_pg_known_free');
    await (await db.dataSource()).runMigrations();
    mine = await boot();
    theirs = await boot();
    // Every round trip of the library's pool goes through its `send`.
    const pool = (partsOf(mine).store.log as unknown as { pool: Record<string, (...args: unknown[]) => unknown> }).pool;
    const send = pool.send!.bind(pool);
    pool.send = (client: unknown, sql: unknown, ...rest: unknown[]) => {
      sent.push(String(sql));
      return send(client, sql, ...rest);
    };
  });
  after(async () => {
    for (const app of apps) await app.close();
    await db.drop();
  });

  it('after its own release, the next grant tests the token it left and gets the next one', async () => {
    const first = await mine.acquire('free:own');
    await first.release();
    grantsSent();
    const second = await mine.acquire('free:own');
    const [grant] = grantsSent();
    assert.equal(grant?.match(knownFreeGrant)?.[1], String(second.fencingToken - 1), 'the one-statement grant was sent');
    assert.doesNotMatch(grant!, /EXECUTE db_lock_grant/, 'no decision, no log search');
    assert.equal(second.fencingToken, first.fencingToken + 1);
    await second.release();
  });

  it('a fenced call ends its lock in its business commit; after it the next grant is the one statement too', async () => {
    const token = await mine.runLocked('free:fenced', (lock) => lock.fencingToken);
    grantsSent();
    const next = await mine.acquire('free:fenced');
    assert.match(grantsSent()[0] ?? '', knownFreeGrant);
    assert.equal(next.fencingToken, token! + 1);
    await next.release();
  });

  it('another process holding the key since: the one statement refuses, nothing is written, and the full grant says busy', async () => {
    await (await mine.acquire('free:theirs')).release();
    const theirLock = await theirs.acquire('free:theirs');
    grantsSent();
    assert.equal(await mine.tryAcquire('free:theirs'), null);
    const [fast, full] = grantsSent();
    assert.match(fast ?? '', knownFreeGrant, 'the refused try was the one-statement grant');
    assert.match(full ?? '', /EXECUTE db_lock_grant/, 'then the full grant decided');
    assert.equal(await liveRows('free:theirs'), 1, 'only their row is live');
    await theirLock.release();
    const next = await mine.acquire('free:theirs', { timeoutMs: 5_000 });
    assert.equal(next.fencingToken, theirLock.fencingToken + 1);
    await next.release();
  });

  it('a row-lock writer that committed since moved the token: the grant decides again and gets the token after it', async () => {
    await (await mine.acquire('free:row-lock')).release();
    const rowLock = await theirs.withLock('free:row-lock', (lock) => lock.fencingToken, { strategy: 'row-lock' });
    grantsSent();
    const lock = await mine.acquire('free:row-lock', { timeoutMs: 5_000 });
    assert.match(grantsSent()[0] ?? '', knownFreeGrant, 'first the one-statement grant, refused');
    assert.equal(lock.fencingToken, rowLock + 1);
    await lock.release();
  });

  it('a row-lock reader still holding the key: a single try is refused at once, a waiting caller gets the key when the reader ends', async () => {
    const first = await mine.acquire('free:reader');
    await first.release();
    let endReader!: () => void;
    const readerIn = new Promise<void>((resolve) => {
      void theirs.withLock('free:reader', () => (resolve(), new Promise<void>((done) => (endReader = done))), { strategy: 'row-lock', mode: 'read' });
    });
    await readerIn;
    grantsSent();
    const startedAt = performance.now();
    assert.equal(await mine.tryAcquire('free:reader'), null, 'the reader holds the key');
    assert.ok(performance.now() - startedAt < 1_000, 'the single try answered without waiting for the reader');
    assert.match(grantsSent()[0] ?? '', knownFreeGrant);
    assert.equal(await liveRows('free:reader'), 0, 'nothing written');
    const waiting = mine.acquire('free:reader', { timeoutMs: 10_000 });
    setTimeout(() => endReader(), 200);
    const lock = await waiting;
    assert.ok(lock.fencingToken > first.fencingToken);
    await lock.release();
  });

  it('tokens only grow when both processes take turns on one key', async () => {
    const tokens: number[] = [];
    for (let round = 0; round < 6; round++) {
      const locks = round % 3 === 2 ? theirs : mine;
      tokens.push(await locks.withLock('free:turns', (lock) => lock.fencingToken, { timeoutMs: 5_000 }));
    }
    for (let i = 1; i < tokens.length; i++) assert.ok(tokens[i]! > tokens[i - 1]!, `tokens ${tokens.join(', ')}`);
  });
});
