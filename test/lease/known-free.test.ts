import { it } from 'node:test';
import assert from 'node:assert/strict';
import { DataSource } from 'typeorm';
import { LockTimeoutError } from '../../lib/index.js';
import { contractSuite } from '../support/contract-targets.js';
import { knownFreeFixture, knownFreeGrant } from './known-free-fixture.js';

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
  const f = knownFreeFixture(target);

  it('after its own release, the next grant tests the token it left and gets the next one', async () => {
    const first = await f.mine.acquire('free:own');
    await first.release();
    f.grantsSent();
    const second = await f.mine.acquire('free:own');
    const [grant] = f.grantsSent();
    assert.equal(grant?.match(knownFreeGrant)?.[1], String(first.fencingToken + 1), 'the grant claimed the token after its own last hold');
    assert.doesNotMatch(grant!, /NOT EXISTS|UPDATE db_lock /, 'no log search, no key row');
    assert.equal(second.fencingToken, first.fencingToken + 1);
    await second.release();
  });

  it('a fenced call ends its lock in its business commit; after that commit the next grant claims the next token too', async () => {
    const token = await f.mine.runLocked('free:fenced', (lock) => lock.fencingToken);
    f.grantsSent();
    const next = await f.mine.acquire('free:fenced');
    assert.equal(f.grantsSent()[0]?.match(knownFreeGrant)?.[1], String(token! + 1));
    assert.equal(next.fencingToken, token! + 1);
    await next.release();
  });

  it('another process holding the key since: the claim refuses, and nothing is written', async () => {
    await (await f.mine.acquire('free:theirs')).release();
    const theirLock = await f.theirs.acquire('free:theirs');
    f.grantsSent();
    assert.equal(await f.mine.tryAcquire('free:theirs'), null);
    assert.match(f.grantsSent()[0] ?? '', knownFreeGrant, 'the refused try was the one-INSERT grant');
    const rows = await f.db.query<{ n: number }[]>("SELECT COUNT(*) AS n FROM db_lock_log WHERE lock_key = ? AND status = 'ACQUIRED'", [
      Buffer.from('free:theirs'),
    ]);
    assert.equal(Number(rows[0]!.n), 1, 'only their row is live');
    await theirLock.release();
    const next = await f.mine.acquire('free:theirs', { timeoutMs: 5_000 });
    assert.equal(next.fencingToken, theirLock.fencingToken + 1);
    await next.release();
  });

  it('a row-lock writer that committed since moved the token: the lease grant decides from the log again and is granted', async () => {
    await (await f.mine.acquire('free:row-lock')).release();
    const rowLock = await f.theirs.withLock('free:row-lock', (lock) => lock.fencingToken, { strategy: 'row-lock' });
    f.grantsSent();
    const lock = await f.mine.acquire('free:row-lock', { timeoutMs: 5_000 });
    assert.match(f.grantsSent()[0] ?? '', knownFreeGrant, 'first the one-INSERT grant, refused');
    assert.equal(lock.fencingToken, rowLock + 1);
    await lock.release();
  });

  it('a row-lock writer still open claimed the next token: our one-INSERT grant is refused, the full grant waits until it commits, and our token follows its', async () => {
    await (await f.mine.acquire('free:writer')).release();
    let commit!: () => void;
    const committed = new Promise<void>((resolve) => (commit = resolve));
    let writerIn!: (token: number) => void;
    const writerHolds = new Promise<number>((resolve) => (writerIn = resolve));
    const writer = f.theirs.withLock(
      'free:writer',
      async (lock) => {
        writerIn(lock.fencingToken);
        await committed;
      },
      { strategy: 'row-lock' },
    );
    const writerToken = await writerHolds;
    f.grantsSent();
    assert.deepEqual(
      (await f.db.claimRows('free:writer')).map((r) => Number(r.fencing_token)),
      [writerToken],
      'the take claimed its token before it read the log',
    );
    await assert.rejects(f.mine.acquire('free:writer', { timeoutMs: 300 }), LockTimeoutError, 'the writer holds the key');
    const [oneInsert, full] = f.grantsSent();
    assert.equal(oneInsert?.match(knownFreeGrant)?.[1], String(writerToken), 'the one-INSERT grant tried the token the writer claimed');
    assert.match(full ?? '', /^START TRANSACTION/, 'then the full grant, which waited on the row lock');
    commit();
    await writer;
    const lock = await f.mine.acquire('free:writer', { timeoutMs: 5_000 });
    assert.ok(lock.fencingToken > writerToken, `token ${lock.fencingToken} above the writer's (${writerToken})`);
    await lock.release();
  });

  it('a row-lock reader still open claimed the next token: our one-INSERT grant is refused, the full grant waits until it commits', async () => {
    const ours = await f.heldOnce('free:reader');
    const dataSource = f.apps[1]!.get(DataSource);
    let commit!: () => void;
    const committed = new Promise<void>((resolve) => (commit = resolve));
    let readerIn!: () => void;
    const readerHolds = new Promise<void>((resolve) => (readerIn = resolve));
    const reader = f.theirs.withLock(
      'free:reader',
      async () => {
        readerIn();
        await committed;
      },
      { strategy: 'row-lock', mode: 'read' },
    );
    await readerHolds;
    assert.ok(dataSource.isInitialized);
    f.grantsSent();
    await assert.rejects(f.mine.acquire('free:reader', { timeoutMs: 300 }), LockTimeoutError, 'the reader holds the key');
    const [oneInsert, full] = f.grantsSent();
    assert.equal(oneInsert?.match(knownFreeGrant)?.[1], String(ours.fencingToken + 1), 'the one-INSERT grant tried the next token');
    assert.match(full ?? '', /^START TRANSACTION/, 'then the full grant, which waited on the row lock');
    assert.equal((await f.db.claimRows('free:reader')).length, 1, 'the reader claimed that token');
    commit();
    await reader;
    const lock = await f.mine.acquire('free:reader', { timeoutMs: 5_000 });
    assert.ok(lock.fencingToken > ours.fencingToken + 1, `token ${lock.fencingToken} above the reader's claim`);
    await lock.release();
  });
});
