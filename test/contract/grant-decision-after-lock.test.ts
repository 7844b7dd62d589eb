import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import { TestDatabase } from '../support/test-database.js';
import { createLockApp } from '../support/lock-app.js';
import { rawSession } from '../support/raw-session.js';
import { type LockService, LockTimeoutError } from '../../lib/index.js';
import { contractSuite } from '../support/contract-targets.js';

/**
 * A single-key grant decides on live log rows only after it holds the key row's lock: a grant
 * that waited for another grant's transaction must see the log row that transaction committed,
 * never a view taken before the wait. On MySQL the decision is one conditional UPDATE of the key
 * row (its NOT EXISTS reads after the row lock); on PostgreSQL, whose READ COMMITTED UPDATE
 * re-checks only the updated row after a wait and reads subqueries in the snapshot taken before
 * it, the rows are locked by one statement and the decision is the next one, with a fresh
 * snapshot. The other grant is played by hand (key row locked and its token bumped, a live log
 * row inserted, not committed); the library's grant is seen waiting in the server; then the other
 * one commits, and the library's grant must be refused. The control: the same, rolled back, and
 * the waiting grant is granted the next token.
 */
async function untilLockWait(db: TestDatabase): Promise<void> {
  if (!(await db.transactionSeen((t) => t.lockWait, 5_000))) throw new Error('Timed out waiting for the grant to wait on the key row');
}

/** The hand-played holder's owner: 36 characters, as the column holds an acquisition id. */
const OTHER_OWNER = '00000000-0000-4000-8000-0000000000aa';

contractSuite('lease-grant-after-row-lock', 'single-key grant decided after the key row lock', { postgres: true }, (target) => {
  let db: TestDatabase;
  const apps: INestApplicationContext[] = [];
  const variants = new Map<string, LockService>();
  const variantNames = target.database === 'postgres' ? ['default'] : ['FOUND_ROWS on', 'FOUND_ROWS off'];
  before(async () => {
    db = await TestDatabase.forTarget(target);
    for (const name of variantNames) {
      const mysqlExtra = name === 'FOUND_ROWS off' ? { flags: ['-FOUND_ROWS'] } : undefined;
      const { app, locks } = await createLockApp(db.settings, target.options({ janitor: false }), { mysqlExtra });
      apps.push(app);
      variants.set(name, locks);
    }
  });
  after(async () => {
    for (const app of apps) await app.close();
    await db?.drop();
  });

  /**
   * Plays another grant of `key` by hand up to its commit: the key row locked with its token
   * bumped, and a live holder's log row inserted. Then the library's grant is asked, seen waiting
   * on the key row, and `end` ('COMMIT' or 'ROLLBACK') ends the other grant. Answers the library's outcome.
   */
  async function grantBehindAnother(locks: LockService, key: string, end: 'COMMIT' | 'ROLLBACK'): Promise<{ outcome: string; token?: number }> {
    // The key row exists, and this process does not know the key free (it would claim the next token
    // with one INSERT then, not decide on the key row).
    await db.query('INSERT INTO db_lock (lock_key, fencing_token) VALUES (?, 1)', [Buffer.from(key)]);
    const other = await rawSession(db.settings);
    try {
      await other.begin();
      await other.query('UPDATE db_lock SET fencing_token = fencing_token + 1 WHERE lock_key = ?', [Buffer.from(key)]);
      await other.query(
        `INSERT INTO db_lock_log (lock_key, mode, owner, holder, fencing_token, status, lease_ms, acquired_at, expires_at) ` +
          `VALUES (?, 'write', ?, 'test', 2, 'ACQUIRED', 60000, ${db.sql.utcNow}, ${db.sql.ago(-60_000)})`,
        [Buffer.from(key), OTHER_OWNER],
      );
      const asked = locks.acquire(key, { timeoutMs: 1_500 }).then(
        async (handle) => {
          const token = handle.fencingToken;
          await handle.release();
          return { outcome: 'granted', token };
        },
        (error: unknown) => ({ outcome: error instanceof LockTimeoutError ? 'timeout' : String(error) }),
      );
      await untilLockWait(db);
      await (end === 'COMMIT' ? other.commit() : other.rollback());
      return await asked;
    } finally {
      await other.end();
    }
  }

  const liveOwners = async (key: string): Promise<string[]> =>
    (
      await db.query<{ owner: string }[]>(`SELECT owner FROM db_lock_log WHERE lock_key = ? AND status IN ('ACQUIRED', 'COMPLETED')`, [
        Buffer.from(key),
      ])
    ).map((r) => r.owner);

  for (const name of variantNames) {
    it(`refuses after waiting on a grant that then commits (${name})`, async () => {
      const key = `after-lock-${name}`;
      const asked = await grantBehindAnother(variants.get(name)!, key, 'COMMIT');
      assert.equal(asked.outcome, 'timeout', 'the waiting grant saw the committed holder');
      assert.deepEqual(await liveOwners(key), [OTHER_OWNER]);
    });
  }

  it('control: the same wait on a grant that rolls back is granted the next token', async () => {
    const key = 'after-lock-rolled-back';
    const asked = await grantBehindAnother(variants.get(variantNames[0]!)!, key, 'ROLLBACK');
    assert.deepEqual(asked, { outcome: 'granted', token: 2 }, 'the rolled-back bump and holder are not seen');
    assert.deepEqual(await liveOwners(key), []);
  });
});
