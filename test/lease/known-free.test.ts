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
 * A process that held a key alone and ended it durably grants it next by one INSERT of its log row
 * claiming the key's next token (T + 1 after its own T), refused by the claim index when anyone
 * was granted since, instead of deciding on the key row and searching the log. What must hold:
 * that INSERT is what the grant sent (else these tests prove nothing), and any grant by anyone
 * since — a lease holder of another process, a row-lock writer that committed, a row-lock writer
 * or reader still open — makes it refuse, exactly as the log search would, and the janitor never
 * removes what would refute it while a process may still know the key free.
 */
contractSuite('lease-mechanics', 'grants of a key this process knows to be free', (target) => {
  let db: TestDatabase;
  const apps: INestApplicationContext[] = [];
  let mine: LockService;
  let theirs: LockService;
  let sent: string[];
  /** The grant statements `mine` sent since the last call. */
  const grantsSent = () =>
    sent.splice(0).filter((sql) => sql.startsWith('START TRANSACTION') || /^(SET STATEMENT .* FOR )?INSERT INTO db_lock_log/.test(sql));
  /** The one-INSERT grant and the token it claims (a literal; wrapped in the doorbell test when the key has a bell). */
  const knownFreeGrant =
    /^(?:SET STATEMENT [^;]* FOR )?INSERT INTO db_lock_log \(.*\) VALUES \(.*'lease', (?:IF\(.*, )?(\d+)(?:, NULL\))?, 'ACQUIRED'/;
  /** Backdates every log row of `key` by an hour: as if the janitor's keeping times had passed (a process's knowledge would have expired too). */
  const agedAnHour = (key: string) =>
    db.query(
      'UPDATE db_lock_log SET acquired_at = acquired_at - INTERVAL 1 HOUR, expires_at = expires_at - INTERVAL 1 HOUR, ended_at = ended_at - INTERVAL 1 HOUR WHERE lock_key = ?',
      [Buffer.from(key)],
    );
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
    // Every statement of the pool goes through queryThen (query is built on it).
    const queryThen = pool.queryThen.bind(pool);
    pool.queryThen = ((sql: string, ...rest: unknown[]) => {
      sent.push(sql);
      return (queryThen as (...args: unknown[]) => unknown)(sql, ...rest);
    }) as typeof pool.queryThen;
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
    assert.equal(grant?.match(knownFreeGrant)?.[1], String(first.fencingToken + 1), 'the grant claimed the token after its own last hold');
    assert.doesNotMatch(grant!, /NOT EXISTS|UPDATE db_lock /, 'no log search, no key row');
    assert.equal(second.fencingToken, first.fencingToken + 1);
    await second.release();
  });

  it('a fenced call ends its lock in its business commit; after that commit the next grant claims the next token too', async () => {
    const token = await mine.runLocked('free:fenced', (lock) => lock.fencingToken);
    grantsSent();
    const next = await mine.acquire('free:fenced');
    assert.equal(grantsSent()[0]?.match(knownFreeGrant)?.[1], String(token! + 1));
    assert.equal(next.fencingToken, token! + 1);
    await next.release();
  });

  it('another process holding the key since: the claim refuses, and nothing is written', async () => {
    await (await mine.acquire('free:theirs')).release();
    const theirLock = await theirs.acquire('free:theirs');
    grantsSent();
    assert.equal(await mine.tryAcquire('free:theirs'), null);
    assert.match(grantsSent()[0] ?? '', knownFreeGrant, 'the refused try was the one-INSERT grant');
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
    assert.match(grantsSent()[0] ?? '', knownFreeGrant, 'first the one-INSERT grant, refused');
    assert.equal(lock.fencingToken, rowLock + 1);
    await lock.release();
  });

  it('the janitor keeps the key row and its newest claim while a process may still know the key free, whatever its settings', async () => {
    const key = 'free:kept';
    const ours = await heldOnce(key);
    assert.equal((await runJanitorOnce({ idleKeyMs: 0, logRetentionMs: 0 })).ran, true);
    assert.equal(await rowsOfKey('db_lock', key), 1, 'the key row was kept');
    assert.equal(await rowsOfKey('db_lock_log', key), 1, 'our claim was kept');
    grantsSent();
    const next = await mine.acquire(key, { timeoutMs: 5_000 });
    assert.equal(grantsSent()[0]?.match(knownFreeGrant)?.[1], String(ours.fencingToken + 1));
    assert.equal(next.fencingToken, ours.fencingToken + 1);
    await next.release();
  });

  /** Our hold of `key`, then a janitor that reaps every idle key row at once, an hour later (as far as the rows tell). */
  const heldThenReaped = async (key: string) => {
    const ours = await heldOnce(key);
    await agedAnHour(key);
    assert.equal((await runJanitorOnce({ idleKeyMs: 0 })).ran, true);
    assert.equal(await rowsOfKey('db_lock', key), 0, 'the key row was reaped');
    return ours;
  };

  it('the janitor reaped the key row after our release, another process re-created, held and released it: our claim refuses, and our token is above theirs', async () => {
    const key = 'free:reaped';
    const ours = await heldThenReaped(key);
    const theirLock = await theirs.acquire(key);
    await theirLock.release();
    assert.ok(theirLock.fencingToken > ours.fencingToken, 'the re-created row continued above the reaped token');
    grantsSent();
    const next = await mine.acquire(key, { timeoutMs: 5_000 });
    assert.equal(grantsSent()[0]?.match(knownFreeGrant)?.[1], String(ours.fencingToken + 1), 'first the claim after our own last hold, refused');
    assert.ok(next.fencingToken > theirLock.fencingToken, `token ${next.fencingToken} above theirs (${theirLock.fencingToken})`);
    await next.release();
  });

  it('the janitor reaped the key row after our release and nobody took the key since: the next grant re-creates it above our token', async () => {
    const key = 'free:reaped-alone';
    const ours = await heldThenReaped(key);
    const next = await mine.acquire(key, { timeoutMs: 5_000 });
    assert.ok(next.fencingToken > ours.fencingToken, `token ${next.fencingToken} above our last one (${ours.fencingToken})`);
    await next.release();
  });

  it('a key row behind its newest claim (its last grant was one INSERT), reaped and pruned: the next token is above that claim', async () => {
    const key = 'free:lagging';
    // As one-INSERT grants leave it: the key row at 50, the newest claim at 60; an hour old.
    await db.query('INSERT INTO db_lock (lock_key, fencing_token, last_granted_at) VALUES (?, 50, UTC_TIMESTAMP(6) - INTERVAL 1 HOUR)', [
      Buffer.from(key),
    ]);
    await db.query(
      `INSERT INTO db_lock_log (lock_key, mode, owner, holder, strategy, fencing_token, status, lease_ms, acquired_at, expires_at, ended_at) ` +
        `VALUES (?, 'write', UUID(), 'test', 'lease', 60, 'RELEASED', 1000, UTC_TIMESTAMP(6) - INTERVAL 1 HOUR, UTC_TIMESTAMP(6) - INTERVAL 1 HOUR, UTC_TIMESTAMP(6) - INTERVAL 1 HOUR)`,
      [Buffer.from(key)],
    );
    // Reaped first (the claim still there), pruned by a later run: no key row is left to lift above the claim then.
    assert.equal((await runJanitorOnce({ idleKeyMs: 0 })).ran, true);
    assert.deepEqual([await rowsOfKey('db_lock', key), await rowsOfKey('db_lock_log', key)], [0, 1], 'reaped, the claim kept');
    assert.equal((await runJanitorOnce({ logRetentionMs: 0 })).ran, true);
    assert.equal(await rowsOfKey('db_lock_log', key), 0, 'then pruned');
    const next = await theirs.acquire(key, { timeoutMs: 5_000 });
    assert.ok(next.fencingToken > 60, `token ${next.fencingToken} above the claim the key row lagged behind`);
    await next.release();
  });

  it('the janitor pruned every ended row of the key after our release: the next grant continues above our token', async () => {
    const key = 'free:pruned';
    const ours = await heldOnce(key);
    // Retention 0 an hour later: every ended row goes, claims too; the key row stays (idle keys are kept for an hour here).
    await agedAnHour(key);
    assert.equal((await runJanitorOnce({ logRetentionMs: 0 })).ran, true);
    assert.equal(await rowsOfKey('db_lock_log', key), 0, 'the key has no log row left');
    const next = await mine.acquire(key, { timeoutMs: 5_000 });
    assert.equal(next.fencingToken, ours.fencingToken + 1);
    await next.release();
  });

  it('a row-lock writer still open claimed the next token: our one-INSERT grant is refused, the full grant waits until it commits, and our token follows its', async () => {
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
    assert.deepEqual(
      (await db.claimRows('free:writer')).map((r) => Number(r.fencing_token)),
      [writerToken],
      'the take claimed its token before it read the log',
    );
    await assert.rejects(mine.acquire('free:writer', { timeoutMs: 300 }), LockTimeoutError, 'the writer holds the key');
    const [oneInsert, full] = grantsSent();
    assert.equal(oneInsert?.match(knownFreeGrant)?.[1], String(writerToken), 'the one-INSERT grant tried the token the writer claimed');
    assert.match(full ?? '', /^START TRANSACTION/, 'then the full grant, which waited on the row lock');
    commit();
    await writer;
    const lock = await mine.acquire('free:writer', { timeoutMs: 5_000 });
    assert.ok(lock.fencingToken > writerToken, `token ${lock.fencingToken} above the writer's (${writerToken})`);
    await lock.release();
  });

  it('a row-lock reader still open claimed the next token: our one-INSERT grant is refused, the full grant waits until it commits', async () => {
    const ours = await heldOnce('free:reader');
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
    const [oneInsert, full] = grantsSent();
    assert.equal(oneInsert?.match(knownFreeGrant)?.[1], String(ours.fencingToken + 1), 'the one-INSERT grant tried the next token');
    assert.match(full ?? '', /^START TRANSACTION/, 'then the full grant, which waited on the row lock');
    assert.equal((await db.claimRows('free:reader')).length, 1, 'the reader claimed that token');
    commit();
    await reader;
    const lock = await mine.acquire('free:reader', { timeoutMs: 5_000 });
    assert.ok(lock.fencingToken > ours.fencingToken + 1, `token ${lock.fencingToken} above the reader's claim`);
    await lock.release();
  });
});
