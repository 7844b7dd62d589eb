import { it } from 'node:test';
import assert from 'node:assert/strict';
import { contractSuite } from '../support/contract-targets.js';
import { knownFreeFixture, knownFreeGrant } from './known-free-fixture.js';

/**
 * What the janitor may remove while a process knows a key free at its token (known-free.test.ts):
 * never what would refute that knowledge, and after a reap or a prune the next token is still
 * above every token the key gave out.
 */
contractSuite('lease-mechanics', 'known-free grants across janitor runs', (target) => {
  const f = knownFreeFixture(target);

  it('the janitor keeps the key row and its newest claim while a process may still know the key free, whatever its settings', async () => {
    const key = 'free:kept';
    const ours = await f.heldOnce(key);
    assert.equal((await f.runJanitorOnce({ idleKeyMs: 0, logRetentionMs: 0 })).ran, true);
    assert.equal(await f.rowsOfKey('db_lock', key), 1, 'the key row was kept');
    assert.equal(await f.rowsOfKey('db_lock_log', key), 1, 'our claim was kept');
    f.grantsSent();
    const next = await f.mine.acquire(key, { timeoutMs: 5_000 });
    assert.equal(f.grantsSent()[0]?.match(knownFreeGrant)?.[1], String(ours.fencingToken + 1));
    assert.equal(next.fencingToken, ours.fencingToken + 1);
    await next.release();
  });

  /** Our hold of `key`, then a janitor that reaps every idle key row at once, an hour later (as far as the rows tell). */
  const heldThenReaped = async (key: string) => {
    const ours = await f.heldOnce(key);
    await f.agedAnHour(key);
    assert.equal((await f.runJanitorOnce({ idleKeyMs: 0 })).ran, true);
    assert.equal(await f.rowsOfKey('db_lock', key), 0, 'the key row was reaped');
    return ours;
  };

  it('the janitor reaped the key row after our release, another process re-created, held and released it: our claim refuses, and our token is above theirs', async () => {
    const key = 'free:reaped';
    const ours = await heldThenReaped(key);
    const theirLock = await f.theirs.acquire(key);
    await theirLock.release();
    assert.ok(theirLock.fencingToken > ours.fencingToken, 'the re-created row continued above the reaped token');
    f.grantsSent();
    const next = await f.mine.acquire(key, { timeoutMs: 5_000 });
    assert.equal(f.grantsSent()[0]?.match(knownFreeGrant)?.[1], String(ours.fencingToken + 1), 'first the claim after our own last hold, refused');
    assert.ok(next.fencingToken > theirLock.fencingToken, `token ${next.fencingToken} above theirs (${theirLock.fencingToken})`);
    await next.release();
  });

  it('the janitor reaped the key row after our release and nobody took the key since: the next grant re-creates it above our token', async () => {
    const key = 'free:reaped-alone';
    const ours = await heldThenReaped(key);
    const next = await f.mine.acquire(key, { timeoutMs: 5_000 });
    assert.ok(next.fencingToken > ours.fencingToken, `token ${next.fencingToken} above our last one (${ours.fencingToken})`);
    await next.release();
  });

  it('a key row behind its newest claim (its last grant was one INSERT), reaped and pruned: the next token is above that claim', async () => {
    const key = 'free:lagging';
    // As one-INSERT grants leave it: the key row at 50, the newest claim at 60; an hour old.
    await f.db.query('INSERT INTO db_lock (lock_key, fencing_token, last_granted_at) VALUES (?, 50, UTC_TIMESTAMP(6) - INTERVAL 1 HOUR)', [
      Buffer.from(key),
    ]);
    await f.db.query(
      `INSERT INTO db_lock_log (lock_key, mode, owner, holder, strategy, fencing_token, status, lease_ms, acquired_at, expires_at, ended_at) ` +
        `VALUES (?, 'write', UUID(), 'test', 'lease', 60, 'RELEASED', 1000, UTC_TIMESTAMP(6) - INTERVAL 1 HOUR, UTC_TIMESTAMP(6) - INTERVAL 1 HOUR, UTC_TIMESTAMP(6) - INTERVAL 1 HOUR)`,
      [Buffer.from(key)],
    );
    // Reaped first (the claim still there), pruned by a later run: no key row is left to lift above the claim then.
    assert.equal((await f.runJanitorOnce({ idleKeyMs: 0 })).ran, true);
    assert.deepEqual([await f.rowsOfKey('db_lock', key), await f.rowsOfKey('db_lock_log', key)], [0, 1], 'reaped, the claim kept');
    assert.equal((await f.runJanitorOnce({ logRetentionMs: 0 })).ran, true);
    assert.equal(await f.rowsOfKey('db_lock_log', key), 0, 'then pruned');
    const next = await f.theirs.acquire(key, { timeoutMs: 5_000 });
    assert.ok(next.fencingToken > 60, `token ${next.fencingToken} above the claim the key row lagged behind`);
    await next.release();
  });

  it('the janitor pruned every ended row of the key after our release: the next grant continues above our token', async () => {
    const key = 'free:pruned';
    const ours = await f.heldOnce(key);
    // Retention 0 an hour later: every ended row goes, claims too; the key row stays (idle keys are kept for an hour here).
    await f.agedAnHour(key);
    assert.equal((await f.runJanitorOnce({ logRetentionMs: 0 })).ran, true);
    assert.equal(await f.rowsOfKey('db_lock_log', key), 0, 'the key has no log row left');
    const next = await f.mine.acquire(key, { timeoutMs: 5_000 });
    assert.equal(next.fencingToken, ours.fencingToken + 1);
    await next.release();
  });
});
