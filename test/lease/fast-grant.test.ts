import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import type { INestApplicationContext } from '@nestjs/common';
import { LockTimeoutError, type LockService } from '../../lib/index.js';
import { TestDatabase } from '../support/test-database.js';
import { createLockApp } from '../support/lock-app.js';
import { callerTrips } from '../support/round-trips.js';
import { contractSuite } from '../support/contract-targets.js';

/**
 * The single-key grant goes first at the shape of its floor (START; UPDATE; INSERT … VALUES;
 * COMMIT), and a refusal there is an error that stops the batch before COMMIT. What must hold:
 * a refused fast try writes nothing and leaves no transaction or row lock behind, the full plan
 * then says why in the same try, and the lease end reported without a read-back is the server's.
 */
contractSuite('lease-mechanics', 'the fast single-key grant', (target) => {
  let db: TestDatabase;
  const apps: INestApplicationContext[] = [];
  let holder: LockService;
  let other: LockService;
  const logRows = async (key: string) =>
    db.query<{ fencing_token: string; status: string; expires_at: string }[]>(
      "SELECT fencing_token, status, DATE_FORMAT(expires_at, '%Y-%m-%dT%H:%i:%s.%fZ') AS expires_at FROM db_lock_log WHERE lock_key = ? ORDER BY id",
      [Buffer.from(key)],
    );
  // No transaction of the apps' connections left open (read until none).
  const noOpenTransaction = async (what: string) => {
    const open = await db.transactionsUntil((them) => them.length === 0);
    assert.equal(open.length, 0, what);
  };

  before(async () => {
    db = await TestDatabase.create();
    const a = await createLockApp(db.settings, { ...target.options(), janitor: false });
    const b = await createLockApp(db.settings, { ...target.options(), janitor: false });
    apps.push(a.app, b.app);
    holder = a.locks;
    other = b.locks;
  });
  after(async () => {
    for (const app of apps) await app.close();
    await db.drop();
  });

  it('a refused try writes no row, leaves no transaction open, and says the key is busy', async () => {
    const held = await holder.acquire('fast:busy');
    const trips = callerTrips(other);
    await assert.rejects(other.acquire('fast:busy', { timeoutMs: 0 }), LockTimeoutError);
    // The fast grant, refused, then the full plan: one try.
    assert.equal(callerTrips(other) - trips, 2, 'a key never refused before goes to the fast grant first');
    assert.deepEqual(
      (await logRows('fast:busy')).map((r) => [Number(r.fencing_token), r.status]),
      [[held.fencingToken, 'ACQUIRED']],
      'only the holder has a row',
    );
    await noOpenTransaction('the refused batch was rolled back');
    // Refused lately: the next try goes straight to the full plan, one round trip.
    const again = callerTrips(other);
    await assert.rejects(other.acquire('fast:busy', { timeoutMs: 0 }), LockTimeoutError);
    assert.equal(callerTrips(other) - again, 1, 'a key refused lately skips the fast grant');
    await held.release();
    // Nothing of the refusals holds the key row: the next grant comes at once, with the next token.
    const next = await other.acquire('fast:busy', { timeoutMs: 0 });
    assert.equal(next.fencingToken, held.fencingToken + 1);
    await next.release();
  });

  it('a free key is granted in one round trip; the lease end reported is the row’s, by the server clock', async () => {
    await (await other.acquire('fast:free')).release(); // its key row (first use goes through the full plan)
    await sleep(1_100); // past the memory of that refusal
    const trips = callerTrips(other);
    const lock = await other.acquire('fast:free', { leaseMs: 20_000 });
    assert.equal(callerTrips(other) - trips, 1);
    const row = (await logRows('fast:free')).at(-1);
    assert.equal(Number(row!.fencing_token), lock.fencingToken);
    const skew = Math.abs(lock.expiresAt.getTime() - new Date(row!.expires_at).getTime());
    // The estimate is the server clock as of the process lease's latest reading: off by the round
    // trips around it, a few ms on loopback; 250 ms of margin for a loaded machine.
    assert.ok(skew < 250, `expiresAt ${lock.expiresAt.toISOString()} vs row ${row!.expires_at}: ${skew} ms apart`);
    await lock.release();
    await noOpenTransaction('no transaction left open after the grant and its release');
  });

  it('a writer queued on the doorbell while the key stays held: refused without writing (each try after a bell wait goes at the floor shape), granted right after the release', async () => {
    const held = await holder.acquire('fast:bell', { leaseMs: 20_000 });
    const waiting = other.acquire('fast:bell', { timeoutMs: 10_000 });
    // Refused at once, then tries after doorbell waits (up to 1 s each) that find the key still held.
    await sleep(2_300);
    assert.deepEqual(
      (await logRows('fast:bell')).map((r) => [Number(r.fencing_token), r.status]),
      [[held.fencingToken, 'ACQUIRED']],
      'the refused tries wrote nothing',
    );
    const releasedAt = performance.now();
    await held.release();
    const lock = await waiting;
    const afterRelease = performance.now() - releasedAt;
    assert.equal(lock.fencingToken, held.fencingToken + 1);
    // Rung by the release: the next in line goes at once (about a millisecond; 1 s is the bell's own wait bound).
    assert.ok(afterRelease < 900, `granted ${Math.round(afterRelease)} ms after the release`);
    await lock.release();
    assert.deepEqual(
      (await logRows('fast:bell')).map((r) => [Number(r.fencing_token), r.status]),
      [
        [held.fencingToken, 'RELEASED'],
        [lock.fencingToken, 'RELEASED'],
      ],
    );
    await noOpenTransaction('no refused batch left a transaction open');
  });
});
