import 'reflect-metadata';
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { LockLostError, LockTimeoutError, SemaphoreLimitError } from '../../lib/index.js';
import { heldLockOf, partsOf } from '../support/lock-internals.js';
import { eventually } from '../support/lock-app.js';
import { pgTestsRun } from '../support/pg-test-database.js';
import { pgLeaseFixture } from '../support/pg-lease-fixture.js';

/**
 * The lease on PostgreSQL where leases run out: a stalled holder taken over with its fenced commit
 * refused, semaphores (each permit its own token, a different limit refused), and the janitor's
 * reclaim of a holder whose process stopped renewing it.
 */
describe('lease on PostgreSQL: takeovers, semaphores, the janitor', { skip: (await pgTestsRun()) ? false : 'no PostgreSQL server' }, () => {
  const fixture = pgLeaseFixture('dblock_pg_lease_expiry');
  const { hold, oneTry, finish, logRows } = fixture;

  it('a stalled holder is taken over after its lease: its fenced commit is refused and its work rolled back', async () => {
    let stalled!: () => void;
    const resumed = new Promise<void>((resolve) => (stalled = resolve));
    const first = fixture.locks
      .runLocked('stalled', async (handle) => {
        // As if its process froze: no renewal, no local abort (its rows no longer follow the process lease).
        partsOf(fixture.locks).watchdog.remove(heldLockOf(handle));
        await fixture.db.query(`UPDATE db_lock_log SET process_id = NULL WHERE id IN (${heldLockOf(handle).rowIds.join(', ')})`);
        await resumed;
        // Written after the stall (a row it had written before would keep the next holder's write waiting on it).
        await fixture.locks.manager.query('UPDATE account SET balance = balance + 1 WHERE id = 1');
      })
      .catch((error: unknown) => error);
    await eventually(async () => (await logRows('stalled')).length === 1, 5_000, 'the first hold');
    const second = await fixture.locks.runLocked(
      'stalled',
      async (handle) => {
        await fixture.locks.manager.query('UPDATE account SET balance = balance + 10 WHERE id = 1');
        return handle.fencingToken;
      },
      { timeoutMs: 10_000 },
    );
    stalled();
    const lost = await first;
    assert.ok(lost instanceof LockLostError, String(lost));
    assert.equal(second, 2);
    assert.equal(Number((await fixture.db.query<{ balance: number }>('SELECT balance FROM account WHERE id = 1'))[0]!.balance), 10);
    const rows = await logRows('stalled');
    assert.deepEqual(
      rows.map((r) => [r.status, Number(r.fencing_token)]),
      [
        ['EXPIRED', 1],
        ['RELEASED', 2],
      ],
    );
    assert.match(rows[0]!.note ?? '', /^taken over by /);
  });

  it('a semaphore lets `limit` holders in at once, each with its own token; a different limit is refused', async () => {
    const permits = await Promise.all([1, 2].map(() => holdUntilReleasedPermit('pool', 2)));
    const third = await fixture.locks.withSemaphore('pool', 2, async () => 'in', { timeoutMs: 0 }).catch((error: unknown) => error);
    assert.ok(third instanceof LockTimeoutError, String(third));
    await assert.rejects(
      fixture.locks.withSemaphore('pool', 3, async () => 'in', { timeoutMs: 0 }),
      (error: unknown) => error instanceof SemaphoreLimitError,
    );
    assert.equal(await oneTry('pool'), 'refused', 'a lock of a key whose permits are live');
    await finish(...permits);
    assert.equal(await fixture.locks.withSemaphore('pool', 2, async () => 'in', { timeoutMs: 0 }), 'in');
    const rows = await logRows('pool');
    assert.deepEqual(
      rows.map((r) => [r.mode, Number(r.fencing_token)]),
      [
        ['permit', 1],
        ['permit', 2],
        ['permit', 3],
      ],
    );
  });

  it('the janitor reclaims a holder whose lease ran out (its process stopped renewing it)', async () => {
    const held = await hold('forgotten');
    const handle = fixture.locks.currentLock;
    assert.equal(handle, undefined);
    const [row] = await fixture.db.query<{ id: string }>("SELECT id FROM db_lock_log WHERE lock_key = 'forgotten'::bytea AND status = 'ACQUIRED'");
    await fixture.db.query("UPDATE db_lock_log SET process_id = NULL, expires_at = clock_timestamp() - interval '1 second' WHERE id = $1", [row!.id]);
    const report = await fixture.locks.runJanitor();
    assert.equal(report.ran, true);
    assert.ok(report.reclaimed >= 1, JSON.stringify(report));
    assert.equal((await logRows('forgotten'))[0]!.status, 'EXPIRED');
    held.release();
    await held.done.catch(() => undefined);
    assert.equal(await oneTry('forgotten'), 'in');
  });

  /** Holds a permit of `key` until released. */
  async function holdUntilReleasedPermit(key: string, limit: number) {
    let release!: () => void;
    let held!: () => void;
    const heldNow = new Promise<void>((resolve) => (held = resolve));
    const done = fixture.locks.withSemaphore(
      key,
      limit,
      async () => {
        held();
        await new Promise<void>((resolve) => (release = resolve));
      },
      { timeoutMs: 5_000 },
    );
    await heldNow;
    return { release: () => release(), done };
  }
});
