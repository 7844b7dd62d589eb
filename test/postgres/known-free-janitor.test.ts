import 'reflect-metadata';
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Module } from '@nestjs/common';
import type { INestApplicationContext } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { TypeOrmModule } from '@nestjs/typeorm';
import { DbLockModule, LockService, type DbLockJanitorOptions, type JanitorReport } from '../../lib/index.js';
import { FENCING_FLOOR_KEY } from '../../lib/core/internal-keys.js';
import { partsOf } from '../support/lock-internals.js';
import { PgTestDatabase, pgTestsRun } from '../support/pg-test-database.js';

/**
 * What the janitor may remove while a process knows a key free at its token (known-free.test.ts),
 * on PostgreSQL. Unlike MySQL, the janitor may reap the key row (and prune our claim) while we know
 * the key free: a reaped key row comes back from the fencing floor its reap raised, so the one
 * statement that tests the key row's token either finds no row, or a row whose token moved if
 * anyone was granted the key since. What must hold whatever the janitor's settings: the one
 * statement never succeeds after another process was granted the key, no two holders are live at
 * once, and every token the key hands out is above every token it gave out before.
 */
describe('known-free grants across janitor runs, on PostgreSQL', { skip: (await pgTestsRun()) ? false : 'no PostgreSQL server' }, () => {
  let db: PgTestDatabase;
  const apps: INestApplicationContext[] = [];
  let mine: LockService;
  let theirs: LockService;
  const sent: string[] = [];
  /** The one-statement grant, and the token it tests. */
  const knownFreeGrant = /UPDATE db_lock l SET fencing_token = l\.fencing_token \+ 1.* AND l\.fencing_token = (\d+)/;
  /** The full grant's decision. */
  const fullGrant = /EXECUTE db_lock_grant/;
  /** The grant batches `mine` sent since the last call. */
  const grantsSent = () => sent.splice(0).filter((sql) => sql.startsWith('BEGIN ISOLATION LEVEL READ COMMITTED'));
  const rowsOfKey = async (table: 'db_lock' | 'db_lock_log', key: string) =>
    Number((await db.query<{ n: string }>(`SELECT count(*) AS n FROM ${table} WHERE lock_key = $1`, [Buffer.from(key)]))[0]!.n);
  const liveRows = async (key: string) =>
    Number(
      (
        await db.query<{ n: string }>("SELECT count(*) AS n FROM db_lock_log WHERE lock_key = $1 AND status IN ('ACQUIRED', 'COMPLETED')", [
          Buffer.from(key),
        ])
      )[0]!.n,
    );
  /** The fencing floor: re-created key rows start from it. */
  const floor = async () =>
    Number((await db.query<{ t: string }>('SELECT fencing_token AS t FROM db_lock WHERE lock_key = $1', [FENCING_FLOOR_KEY]))[0]?.t ?? 0);
  /** Backdates every log row of `key` by an hour: past the prune's retention when it is below an hour. */
  const logAgedAnHour = (key: string) =>
    db.query(
      "UPDATE db_lock_log SET acquired_at = acquired_at - interval '1 hour', expires_at = expires_at - interval '1 hour', " +
        "ended_at = ended_at - interval '1 hour' WHERE lock_key = $1",
      [Buffer.from(key)],
    );
  /** Backdates the key row's last grant by an hour as well: idle for any idleKeyMs up to an hour. */
  const agedAnHour = async (key: string) => {
    await logAgedAnHour(key);
    await db.query("UPDATE db_lock SET last_granted_at = last_granted_at - interval '1 hour' WHERE lock_key = $1", [Buffer.from(key)]);
  };
  /** Our acquire and release of `key`: the key is known free at its token afterwards. */
  const heldOnce = async (key: string) => {
    const handle = await mine.acquire(key);
    await handle.release();
    return handle;
  };
  /** Strictly increasing, or the message says which tokens were not. */
  const increasing = (tokens: readonly number[]) => {
    for (let i = 1; i < tokens.length; i++) assert.ok(tokens[i]! > tokens[i - 1]!, `tokens ${tokens.join(', ')}`);
  };

  async function boot(janitor: DbLockJanitorOptions | false = false): Promise<{ app: INestApplicationContext; locks: LockService }> {
    @Module({
      imports: [TypeOrmModule.forRoot({ ...db.options(), autoLoadEntities: true }), DbLockModule.forRoot({ escapedWrites: 'ignore', janitor })],
    })
    class PgApp {}
    const app = await NestFactory.createApplicationContext(PgApp, { logger: ['error'] });
    return { app, locks: app.get(LockService) };
  }

  /** One janitor run with these settings, from a process of its own (its timer effectively off); its report, which must say it ran. */
  async function runJanitorOnce(settings: { idleKeyMs?: number; logRetentionMs?: number }): Promise<JanitorReport> {
    const run = await boot({ intervalMs: 3_600_000, ...settings });
    try {
      const report = await run.locks.runJanitor();
      assert.equal(report.ran, true, JSON.stringify(report));
      return report;
    } finally {
      await run.app.close();
    }
  }

  before(async () => {
    db = await PgTestDatabase.create('dblock_pg_known_free_janitor');
    await (await db.dataSource()).runMigrations();
    for (const booted of [await boot(), await boot()]) apps.push(booted.app);
    mine = apps[0]!.get(LockService);
    theirs = apps[1]!.get(LockService);
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

  it('the janitor pruned every ended row of the key after our release, the key row kept: the one statement grants the next token', async () => {
    const key = 'free:pruned';
    const ours = await heldOnce(key);
    // Only the log is an hour old: the key row was granted just now, so the default idleKeyMs (an hour) keeps it.
    await logAgedAnHour(key);
    const report = await runJanitorOnce({ logRetentionMs: 0 });
    assert.ok(report.pruned >= 1, JSON.stringify(report));
    assert.deepEqual([await rowsOfKey('db_lock', key), await rowsOfKey('db_lock_log', key)], [1, 0], 'the key row kept, no log row left');
    grantsSent();
    const next = await mine.acquire(key, { timeoutMs: 5_000 });
    // The control that these tests are not blind: the statement sent tests our token, and it alone granted.
    const grants = grantsSent();
    assert.equal(grants.length, 1, 'one batch');
    assert.equal(grants[0]?.match(knownFreeGrant)?.[1], String(ours.fencingToken), 'the one-statement grant, testing our token');
    assert.equal(next.fencingToken, ours.fencingToken + 1);
    await next.release();
  });

  // Replaces MySQL's "the janitor keeps the key row and the newest claim while a process may know
  // the key free": on PostgreSQL both may go, since the key's token is its row's counter and a
  // reaped row comes back from the fencing floor, never from a pruned claim.
  it('the janitor may reap the key row and prune our claim right after our release: the one statement then refuses and the next token is above ours', async () => {
    const key = 'free:gone';
    const ours = await heldOnce(key);
    const report = await runJanitorOnce({ idleKeyMs: 0, logRetentionMs: 0 });
    assert.ok(report.reapedKeys >= 1 && report.pruned >= 1, JSON.stringify(report));
    assert.deepEqual([await rowsOfKey('db_lock', key), await rowsOfKey('db_lock_log', key)], [0, 0], 'nothing of the key left');
    assert.ok((await floor()) >= ours.fencingToken, 'the floor was raised to the reaped token');
    grantsSent();
    const next = await mine.acquire(key, { timeoutMs: 5_000 });
    const grants = grantsSent();
    assert.equal(grants[0]?.match(knownFreeGrant)?.[1], String(ours.fencingToken), 'first the one-statement grant, testing our token');
    assert.ok(
      grants.slice(1).some((sql) => fullGrant.test(sql)),
      'refused (no key row): the full grant decided',
    );
    assert.ok(next.fencingToken > ours.fencingToken, `token ${next.fencingToken} above ours (${ours.fencingToken})`);
    await next.release();
  });

  for (const settings of [{ idleKeyMs: 0, logRetentionMs: 0 }, { idleKeyMs: 0 }, { logRetentionMs: 0 }, {}]) {
    it(`another process granted the key since our release, janitor runs in between (${JSON.stringify(settings)}): the one statement refuses and the tokens keep growing`, async () => {
      const key = `free:since:${Object.keys(settings).join('+') || 'defaults'}`;
      const reaps = settings.idleKeyMs === 0;
      const prunes = settings.logRetentionMs === 0;
      const ours = await heldOnce(key);
      // The log an hour old; the key row's last grant as it is (idleKeyMs 0 reaps it anyway, the default keeps it).
      await logAgedAnHour(key);
      const first = await runJanitorOnce(settings);
      if (reaps) assert.ok(first.reapedKeys >= 1, JSON.stringify(first));
      if (prunes) assert.ok(first.pruned >= 1, JSON.stringify(first));
      const theirLock = await theirs.acquire(key, { timeoutMs: 5_000 });
      await theirLock.release();
      await logAgedAnHour(key);
      const second = await runJanitorOnce(settings);
      if (reaps) assert.ok(second.reapedKeys >= 1, JSON.stringify(second));
      if (prunes) assert.ok(second.pruned >= 1, JSON.stringify(second));
      assert.deepEqual(
        [await rowsOfKey('db_lock', key), await rowsOfKey('db_lock_log', key)],
        [reaps ? 0 : 1, prunes ? 0 : 2],
        'what the janitor removed',
      );
      grantsSent();
      const next = await mine.acquire(key, { timeoutMs: 5_000 });
      const grants = grantsSent();
      assert.equal(grants[0]?.match(knownFreeGrant)?.[1], String(ours.fencingToken), 'first the one-statement grant, testing our token');
      assert.ok(
        grants.slice(1).some((sql) => fullGrant.test(sql)),
        'refused: the full grant decided',
      );
      increasing([ours.fencingToken, theirLock.fencingToken, next.fencingToken]);
      await next.release();
    });
  }

  /** Our hold of `key`, then a janitor that reaps every idle key row at once, an hour later (as far as the rows tell). */
  const heldThenReaped = async (key: string) => {
    const ours = await heldOnce(key);
    await agedAnHour(key);
    const report = await runJanitorOnce({ idleKeyMs: 0 });
    assert.ok(report.reapedKeys >= 1, JSON.stringify(report));
    assert.equal(await rowsOfKey('db_lock', key), 0, 'the key row was reaped');
    return ours;
  };

  it('the key row reaped after our release, re-created and held by another process: the one statement refuses, the try answers null, only their row is live', async () => {
    const key = 'free:reaped-held';
    const ours = await heldThenReaped(key);
    const theirLock = await theirs.acquire(key);
    assert.ok(theirLock.fencingToken > ours.fencingToken, 'the re-created row continued above the reaped token');
    grantsSent();
    assert.equal(await mine.tryAcquire(key), null, 'they hold the key');
    const grants = grantsSent();
    assert.equal(grants[0]?.match(knownFreeGrant)?.[1], String(ours.fencingToken), 'the refused try was the one-statement grant');
    assert.match(grants[1] ?? '', fullGrant, 'then the full grant decided');
    assert.equal(await liveRows(key), 1, 'only their row is live');
    await theirLock.release();
    const next = await mine.acquire(key, { timeoutMs: 5_000 });
    increasing([ours.fencingToken, theirLock.fencingToken, next.fencingToken]);
    await next.release();
  });

  it('the key row reaped after our release, another process re-created, held and released it: the one statement refuses, and our token is above theirs', async () => {
    const key = 'free:reaped';
    const ours = await heldThenReaped(key);
    const theirLock = await theirs.acquire(key);
    await theirLock.release();
    assert.ok(theirLock.fencingToken > ours.fencingToken, 'the re-created row continued above the reaped token');
    grantsSent();
    const next = await mine.acquire(key, { timeoutMs: 5_000 });
    const grants = grantsSent();
    assert.equal(grants[0]?.match(knownFreeGrant)?.[1], String(ours.fencingToken), 'first the one-statement grant, testing our token, refused');
    assert.match(grants[1] ?? '', fullGrant, 'then the full grant decided');
    assert.ok(next.fencingToken > theirLock.fencingToken, `token ${next.fencingToken} above theirs (${theirLock.fencingToken})`);
    await next.release();
  });

  it('the key row reaped after our release and nobody took the key since: the next grant re-creates it from a floor at or above our token and gets a greater one', async () => {
    const key = 'free:reaped-alone';
    const ours = await heldThenReaped(key);
    const raised = await floor();
    assert.ok(raised >= ours.fencingToken, `floor ${raised} at or above our token ${ours.fencingToken}`);
    grantsSent();
    const next = await mine.acquire(key, { timeoutMs: 5_000 });
    assert.equal(grantsSent()[0]?.match(knownFreeGrant)?.[1], String(ours.fencingToken), 'the one-statement grant was tried first');
    assert.ok(next.fencingToken > raised, `token ${next.fencingToken} above the floor (${raised}) and our last one (${ours.fencingToken})`);
    assert.equal(await liveRows(key), 1);
    await next.release();
  });

  // Replaces MySQL's "a key row behind its newest claim, reaped and pruned": on PostgreSQL every
  // grant bumps the key row, so it is never behind a claim; what must hold is that a key whose
  // row and log are both gone still continues above the highest token it gave out, carried only
  // by the floor its reap raised.
  it('a key that gave out tokens far above the others, its row reaped and its log pruned in one run: the next token is above all it gave out', async () => {
    const key = 'free:high';
    const tokens: number[] = [];
    for (const locks of [mine, theirs, mine]) tokens.push(await locks.withLock(key, (lock) => lock.fencingToken, { timeoutMs: 5_000 }));
    // As after a long history: the key row's counter at 1000, far above every other key's, its last grant an hour old.
    await db.query('UPDATE db_lock SET fencing_token = 1000 WHERE lock_key = $1', [Buffer.from(key)]);
    tokens.push(1000);
    await agedAnHour(key);
    const report = await runJanitorOnce({ idleKeyMs: 0, logRetentionMs: 0 });
    assert.ok(report.reapedKeys >= 1 && report.pruned >= 1, JSON.stringify(report));
    assert.deepEqual([await rowsOfKey('db_lock', key), await rowsOfKey('db_lock_log', key)], [0, 0], 'nothing of the key left');
    tokens.push(await theirs.withLock(key, (lock) => lock.fencingToken, { timeoutMs: 5_000 }));
    // Ours knew the key free at its token from before the jump: refused, then above the others.
    tokens.push(await mine.withLock(key, (lock) => lock.fencingToken, { timeoutMs: 5_000 }));
    increasing(tokens);
  });
});
