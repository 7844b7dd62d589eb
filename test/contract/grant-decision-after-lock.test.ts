import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import { TestDatabase } from '../support/test-database.js';
import { createLockApp } from '../support/lock-app.js';
import { type LockService, LockTimeoutError } from '../../lib/index.js';
import { contractSuite } from '../support/contract-targets.js';

/**
 * A single-key grant decides in one conditional UPDATE of the key's row, whose NOT EXISTS looks
 * for live log rows. That read must happen after the row lock is taken: a grant that waited for
 * another grant's transaction must see the log row that transaction committed, never a view
 * taken before the wait. The other grant is played by hand (key row locked, live log row
 * inserted, not committed); the library's grant is seen waiting on it in InnoDB's transaction list; then the
 * other one commits, and the library's grant must be refused.
 */
async function untilLockWait(db: TestDatabase): Promise<void> {
  if (!(await db.transactionSeen((t) => t.lockWait, 5_000))) throw new Error('Timed out waiting for the grant to wait on the key row');
}

contractSuite('lease-grant-after-row-lock', 'single-key grant decided after the key row lock', () => {
  let db: TestDatabase;
  const apps: INestApplicationContext[] = [];
  const variants = new Map<string, LockService>();
  before(async () => {
    db = await TestDatabase.create();
    for (const [name, flags] of [
      ['FOUND_ROWS on', []],
      ['FOUND_ROWS off', ['-FOUND_ROWS']],
    ] as const) {
      const { app, locks } = await createLockApp(db.settings, { janitor: false }, { mysqlExtra: { flags } });
      apps.push(app);
      variants.set(name, locks);
    }
  });
  after(async () => {
    for (const app of apps) await app.close();
    await db?.drop();
  });

  for (const name of ['FOUND_ROWS on', 'FOUND_ROWS off']) {
    it(`refuses after waiting on a grant that then commits (${name})`, async () => {
      const locks = variants.get(name)!;
      const key = `after-lock-${name}`;
      // The key row exists, and this process does not know the key free (it would claim the next token
      // with one INSERT then, not decide on the key row).
      await db.query('INSERT INTO db_lock (lock_key, fencing_token) VALUES (?, 1)', [Buffer.from(key)]);
      const other = await db.session();
      try {
        await other.query('START TRANSACTION');
        await other.query('UPDATE db_lock SET fencing_token = LAST_INSERT_ID(fencing_token + 1) WHERE lock_key = ?', [Buffer.from(key)]);
        await other.query(
          `INSERT INTO db_lock_log (lock_key, mode, owner, holder, fencing_token, status, lease_ms, acquired_at, expires_at) ` +
            `VALUES (?, 'write', 'other', 'test', LAST_INSERT_ID(), 'ACQUIRED', 60000, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL 60 SECOND)`,
          [Buffer.from(key)],
        );
        const asked = locks.acquire(key, { timeoutMs: 1_500 }).then(
          () => 'granted',
          (error: unknown) => (error instanceof LockTimeoutError ? 'timeout' : String(error)),
        );
        await untilLockWait(db);
        await other.query('COMMIT');
        assert.equal(await asked, 'timeout', 'the waiting grant saw the committed holder');
        const live = await db.query<{ owner: string }[]>(`SELECT owner FROM db_lock_log WHERE lock_key = ? AND status IN ('ACQUIRED', 'COMPLETED')`, [
          Buffer.from(key),
        ]);
        assert.deepEqual(
          live.map((r) => r.owner),
          ['other'],
        );
      } finally {
        await other.end();
      }
    });
  }
});
