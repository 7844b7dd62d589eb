import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { LockTimeoutError, type LockService } from '../../lib/index.js';
import { TestDatabase } from '../support/test-database.js';
import { createLockApp } from '../support/lock-app.js';
import { mysqlLogOf } from '../support/lock-internals.js';
import { contractSuite } from '../support/contract-targets.js';

/**
 * A process that held a key alone and ended it durably grants it next by testing the key row's
 * token instead of searching the log (`fencing_token = T` in the deciding UPDATE). What must
 * hold: that test is what the grant sent (else these tests prove nothing), and any grant by
 * anyone since — a lease holder of another process, a row-lock writer that committed, a row-lock
 * reader still open — makes it refuse, or wait, exactly as the log search would.
 */
contractSuite('lease-mechanics', 'grants of a key this process knows to be free', (target) => {
  let db: TestDatabase;
  const apps: INestApplicationContext[] = [];
  let mine: LockService;
  let theirs: LockService;
  let sent: string[];
  /** The grant statements `mine` sent since the last call. */
  const grantsSent = () => sent.splice(0).filter((sql) => sql.startsWith('START TRANSACTION'));
  const knownFreeTest = /AND fencing_token = (\d+)/;
  /** Our acquire and release of `key`: the key is known free at its token afterwards. */
  const heldOnce = async (key: string) => {
    const handle = await mine.acquire(key);
    await handle.release();
    return handle;
  };
  /** Rows of `key` in a lock table. */
  const rowsOfKey = async (table: 'db_lock' | 'db_lock_log', key: string) =>
    Number((await db.query<{ n: number }[]>(`SELECT COUNT(*) AS n FROM ${table} WHERE lock_key = ?`, [Buffer.from(key)]))[0]!.n);
  /** One janitor run with these settings, from a process of its own (its timer effectively off); its report. */
  const runJanitorOnce = async (janitor: { idleKeyMs?: number; logRetentionMs?: number }) => {
    const run = await createLockApp(db.settings, { ...target.options(), janitor: { intervalMs: 3_600_000, ...janitor } });
    try {
      return await run.locks.runJanitor();
    } finally {
      await run.app.close();
    }
  };

  before(async () => {
    db = await TestDatabase.create();
    const a = await createLockApp(db.settings, { ...target.options(), janitor: false });
    const b = await createLockApp(db.settings, { ...target.options(), janitor: false });
    apps.push(a.app, b.app);
    mine = a.locks;
    theirs = b.locks;
    sent = [];
    const pool = mysqlLogOf(mine).pool;
    const query = pool.query.bind(pool);
    pool.query = ((sql: string, options: Parameters<typeof query>[1]) => {
      sent.push(sql);
      return query(sql, options);
    }) as typeof pool.query;
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
    assert.equal(grant?.match(knownFreeTest)?.[1], String(first.fencingToken), 'the grant tested the token of its own last hold');
    assert.doesNotMatch(grant!, /NOT EXISTS/, 'no log search');
    assert.equal(second.fencingToken, first.fencingToken + 1);
    await second.release();
  });

  it('a fenced call ends its lock in its business commit; after that commit the next grant tests the token too', async () => {
    const token = await mine.runLocked('free:fenced', (lock) => lock.fencingToken);
    grantsSent();
    const next = await mine.acquire('free:fenced');
    assert.equal(grantsSent()[0]?.match(knownFreeTest)?.[1], String(token));
    assert.equal(next.fencingToken, token! + 1);
    await next.release();
  });

  it('another process holding the key since: the token test refuses, and nothing is written', async () => {
    await (await mine.acquire('free:theirs')).release();
    const theirLock = await theirs.acquire('free:theirs');
    grantsSent();
    assert.equal(await mine.tryAcquire('free:theirs'), null);
    assert.match(grantsSent()[0] ?? '', knownFreeTest, 'the refused try was the token test');
    const rows = await db.query<{ n: number }[]>("SELECT COUNT(*) AS n FROM db_lock_log WHERE lock_key = ? AND status = 'ACQUIRED'", [
      Buffer.from('free:theirs'),
    ]);
    assert.equal(Number(rows[0]!.n), 1, 'only their row is live');
    await theirLock.release();
    const next = await mine.acquire('free:theirs', { timeoutMs: 5_000 });
    assert.equal(next.fencingToken, theirLock.fencingToken + 1);
    await next.release();
  });

  it('a row-lock writer that committed since moved the token: the lease grant decides from the log again and is granted', async () => {
    await (await mine.acquire('free:row-lock')).release();
    const rowLock = await theirs.withLock('free:row-lock', (lock) => lock.fencingToken, { strategy: 'row-lock' });
    grantsSent();
    const lock = await mine.acquire('free:row-lock', { timeoutMs: 5_000 });
    assert.match(grantsSent()[0] ?? '', knownFreeTest, 'first the token test, refused');
    assert.equal(lock.fencingToken, rowLock + 1);
    await lock.release();
  });

  it('the janitor reaped the key row after our release, another process re-created, held and released it: our token test refuses, and our token is above theirs', async () => {
    const key = 'free:reaped';
    const ours = await heldOnce(key);
    // A janitor that reaps every idle key row at once.
    assert.equal((await runJanitorOnce({ idleKeyMs: 0 })).ran, true);
    assert.equal(await rowsOfKey('db_lock', key), 0, 'the key row was reaped');
    const theirLock = await theirs.acquire(key);
    await theirLock.release();
    assert.ok(theirLock.fencingToken > ours.fencingToken, 'the re-created row continued above the reaped token');
    grantsSent();
    const next = await mine.acquire(key, { timeoutMs: 5_000 });
    assert.equal(grantsSent()[0]?.match(knownFreeTest)?.[1], String(ours.fencingToken), 'first the token test of our own last hold, refused');
    assert.ok(next.fencingToken > theirLock.fencingToken, `token ${next.fencingToken} above theirs (${theirLock.fencingToken})`);
    await next.release();
  });

  it('the janitor reaped the key row after our release and nobody took the key since: the next grant re-creates it above our token', async () => {
    const key = 'free:reaped-alone';
    const ours = await heldOnce(key);
    assert.equal((await runJanitorOnce({ idleKeyMs: 0 })).ran, true);
    const next = await mine.acquire(key, { timeoutMs: 5_000 });
    assert.ok(next.fencingToken > ours.fencingToken, `token ${next.fencingToken} above our last one (${ours.fencingToken})`);
    await next.release();
  });

  it('the janitor pruned every ended row of the key after our release: the next grant continues above our token', async () => {
    const key = 'free:pruned';
    const ours = await heldOnce(key);
    // Retention 0: every ended row goes; the key row stays (idle keys are kept for an hour here).
    assert.equal((await runJanitorOnce({ logRetentionMs: 0 })).ran, true);
    assert.equal(await rowsOfKey('db_lock_log', key), 0, 'the key has no log row left');
    const next = await mine.acquire(key, { timeoutMs: 5_000 });
    assert.equal(next.fencingToken, ours.fencingToken + 1);
    await next.release();
  });

  it('a row-lock writer still open holds the token test back until it commits, and our token follows its', async () => {
    await (await mine.acquire('free:writer')).release();
    let commit!: () => void;
    const committed = new Promise<void>((resolve) => (commit = resolve));
    let writerIn!: (token: number) => void;
    const writerHolds = new Promise<number>((resolve) => (writerIn = resolve));
    const writer = theirs.withLock(
      'free:writer',
      async (lock) => {
        writerIn(lock.fencingToken);
        await committed;
      },
      { strategy: 'row-lock' },
    );
    const writerToken = await writerHolds;
    grantsSent();
    await assert.rejects(mine.acquire('free:writer', { timeoutMs: 300 }), LockTimeoutError, 'the writer holds the key');
    assert.match(grantsSent()[0] ?? '', knownFreeTest, 'the token test was sent and waited on the row lock');
    commit();
    await writer;
    const lock = await mine.acquire('free:writer', { timeoutMs: 5_000 });
    assert.ok(lock.fencingToken > writerToken, `token ${lock.fencingToken} above the writer's (${writerToken})`);
    await lock.release();
  });

  it('a row-lock reader still open holds the token test back until it commits', async () => {
    await (await mine.acquire('free:reader')).release();
    const dataSource = apps[1]!.get(DataSource);
    let commit!: () => void;
    const committed = new Promise<void>((resolve) => (commit = resolve));
    let readerIn!: () => void;
    const readerHolds = new Promise<void>((resolve) => (readerIn = resolve));
    const reader = theirs.withLock(
      'free:reader',
      async () => {
        readerIn();
        await committed;
      },
      { strategy: 'row-lock', mode: 'read' },
    );
    await readerHolds;
    assert.ok(dataSource.isInitialized);
    grantsSent();
    await assert.rejects(mine.acquire('free:reader', { timeoutMs: 300 }), LockTimeoutError, 'the reader holds the key');
    assert.match(grantsSent()[0] ?? '', knownFreeTest, 'the token test was sent and waited on the row lock');
    commit();
    await reader;
    const lock = await mine.acquire('free:reader', { timeoutMs: 5_000 });
    await lock.release();
  });
});
