import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import { TestDatabase } from '../support/test-database.js';
import { createLockApp, eventually } from '../support/lock-app.js';
import { LockTimeoutError, type LockService } from '../../lib/index.js';
import { acquisitionIdOf, freeze, processIdOf, stall, thaw } from '../support/lock-internals.js';
import { contractSuite } from '../support/contract-targets.js';
import { rawSession, type RawSession } from '../support/raw-session.js';

/**
 * Mutual exclusion against a late renewal. A holder whose lease ran out but was not reclaimed yet may still
 * renew (its row is live; the renewal writes its process's lease row). If that renewal commits
 * while a waiting grant is between "count the live holders" and "mark the expired ones EXPIRED",
 * the grant must not go ahead: otherwise it skips the now-renewed row and two holders own the key.
 * We widen that window by holding the renewal's row lock open on a second connection until the
 * grant is seen waiting on it. (On PostgreSQL the grant's takeover locks the holders' processes
 * FOR SHARE before it ends the expired ones: it waits there for the renewal to commit.)
 */
contractSuite('lease-renewal', 'grant vs concurrent renewal of an expired holder', { postgres: true }, (target) => {
  let db: TestDatabase;
  let app: INestApplicationContext;
  let locks: LockService;
  let admin: RawSession;
  before(async () => {
    db = await TestDatabase.forTarget(target);
    ({ app, locks } = await createLockApp(db.settings, target.options({ leaseMs: 1000 })));
    admin = await rawSession(db.settings);
  });
  after(async () => {
    await admin?.end();
    await app?.close();
    await db?.drop();
  });

  for (const staleMode of ['write', 'read'] as const) {
    it(`a ${staleMode} holder renewed after its lease ran out is not taken over by a writer`, async () => {
      const key = `race-${staleMode}`;
      const stale = await locks.acquire(key, { mode: staleMode, leaseMs: 200 });
      freeze(locks); // the process stalls: no renewal, no local abort
      await eventually(async () => (await locks.inspect(key)).holders.length === 0, 5000, 'the stale lease to run out');

      // The late renewal of the stale holder's process lease, kept uncommitted for a moment (from
      // the future, so the renewed holder stays live while the test looks: 30 s from now).
      await admin.begin();
      await admin.query(`UPDATE db_lock_process SET renewed_at = ${db.sql.ago(-30_000)} WHERE id = ?`, [processIdOf(locks)]);
      const attempt = locks.acquire(key, { mode: 'write', timeoutMs: 1500 }).then(
        (lock) => lock,
        (error: unknown) => error,
      );
      // Commit the renewal once the grant either waits on its row lock or has already decided.
      let settled = false;
      void attempt.then(() => (settled = true));
      try {
        await eventually(async () => settled || (await lockWaits(db)) > 0, 900, 'the grant to wait on the renewing row or decide');
      } finally {
        await admin.commit();
      }

      const outcome = await attempt;
      const live = (await db.logRows(key)).filter(
        (r) => (r.status === 'ACQUIRED' || r.status === 'COMPLETED') && (r.lease_ends_at as Date).getTime() > Date.now(),
      ) as { owner: string }[];
      if (!(outcome instanceof LockTimeoutError)) await (outcome as { release(): Promise<void> }).release?.().catch(() => undefined);
      assert.ok(
        outcome instanceof LockTimeoutError,
        `the writer must not be granted over a renewed holder (got ${(outcome as Error)?.name ?? 'a lock'}; live owners ${live.length})`,
      );
      assert.deepEqual(
        live.map((r) => r.owner),
        [acquisitionIdOf(stale)],
        'only the renewed holder is live',
      );
      thaw(locks);
      await stale.release(); // its row was renewed, so this is a normal release
      await admin.query(`UPDATE db_lock_process SET renewed_at = ${db.sql.utcNow} WHERE id = ?`, [processIdOf(locks)]);
      const rows = await db.logRows(key);
      assert.deepEqual(
        rows.map((r) => r.status),
        ['RELEASED'],
      );
    });
  }

  it('a grant that waited on a row lock longer than its own lease still holds a live row', async () => {
    const key = 'race-own-row';
    const stale = await locks.acquire(key, { leaseMs: 200 });
    await stall(locks, stale);
    await eventually(async () => (await locks.inspect(key)).holders.length === 0, 5000, 'the stale lease to run out');
    // Something (a fenced commit, a janitor pass) holds the stale row's lock for a while; the row stays expired.
    await admin.begin();
    await admin.query(`UPDATE db_lock_log SET note = 'row lock held by the test' WHERE owner = ?`, [acquisitionIdOf(stale)]);
    const attempt = locks.acquire(key, { leaseMs: 100, timeoutMs: 3000 });
    try {
      await eventually(async () => (await lockWaits(db, 300)) > 0, 900, 'the grant to wait on the stale row for 300 ms (3 x its lease)');
    } finally {
      await admin.commit();
    }
    const fresh = await attempt;
    const rows = await db.logRows(key);
    assert.deepEqual(
      rows.map((r) => [r.owner === acquisitionIdOf(stale) ? 'stale' : 'fresh', r.status]),
      [
        ['stale', 'EXPIRED'],
        ['fresh', 'ACQUIRED'],
      ],
    );
    assert.equal((await locks.inspect(key)).holders[0]?.owner, acquisitionIdOf(fresh));
    await fresh.release(); // would throw LockLostError if the grant had expired its own row
    await assert.rejects(stale.release(), { name: 'LockLostError' });
  });
});

/**
 * Statements on the lock tables of this database running for `minMs` or more: blocked on a row lock.
 * On PostgreSQL: sessions waiting for a lock that long, in a statement (a grant's batch) on those tables.
 */
async function lockWaits(db: TestDatabase, minMs = 50): Promise<number> {
  const rows = await db.query<{ n: number }[]>(
    db.type === 'postgres'
      ? `SELECT COUNT(*) AS n FROM pg_stat_activity WHERE datname = ? AND pid <> pg_backend_pid() AND wait_event_type = 'Lock' ` +
          `AND clock_timestamp() - state_change >= ? * interval '1 millisecond' AND query LIKE '%db_lock%'`
      : `SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST WHERE db = ? AND id <> CONNECTION_ID() AND command = 'Query' AND time_ms >= ? AND info LIKE '%db_lock%'`,
    [db.name, minMs],
  );
  return Number(rows[0]!.n);
}
