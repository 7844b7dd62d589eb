import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import { type LockService, LockTimeoutError } from '../../lib/index.js';
import { TestDatabase } from '../support/test-database.js';
import { createLockApp, eventually } from '../support/lock-app.js';
import { rowIdsOf, stall } from '../support/lock-internals.js';
import { rawSession } from '../support/raw-session.js';
import { outcome } from '../support/settled.js';
import { contractSuite } from '../support/contract-targets.js';

/**
 * A takeover ends only holders whose lease has run out when it ends them. Here the expired
 * holder's log row is extended while the takeover waits for it: another session holds the row,
 * the takeover chooses it as due and waits, then that session moves its lease 30 s on and
 * commits. The takeover must then leave the holder alone (the key stays busy, its row live).
 * On PostgreSQL the choice is read in the takeover statement's snapshot and its UPDATE tests
 * only its own WHERE on the row's newest version: without the row's lease tested there, the
 * holder was ended EXPIRED right after its extend, and the waiter granted.
 */
contractSuite('lease-takeover', 'a takeover waiting on a holder extended meanwhile', { postgres: true }, (target) => {
  let db: TestDatabase;
  let holderApp: INestApplicationContext;
  let takerApp: INestApplicationContext;
  let holderLocks: LockService;
  let takerLocks: LockService;
  before(async () => {
    db = await TestDatabase.forTarget(target);
    ({ app: holderApp, locks: holderLocks } = await createLockApp(db.settings, target.options({ janitor: false })));
    ({ app: takerApp, locks: takerLocks } = await createLockApp(db.settings, target.options({ janitor: false })));
  });
  after(async () => {
    await holderApp?.close();
    await takerApp?.close();
    await db?.drop();
  });

  it('leaves the extended holder live; the waiter times out', async () => {
    const key = 'extended-meanwhile';
    const holder = await holderLocks.acquire(key, { leaseMs: 300 });
    await stall(holderLocks, holder); // nothing renews it: its own row's lease is the only one
    await eventually(async () => (await takerLocks.inspect(key)).holders.length === 0, 5_000, 'the lease to run out');
    const [rowId] = rowIdsOf(holder);
    const other = await rawSession(db.settings);
    try {
      await other.begin();
      await other.query('SELECT id FROM db_lock_log WHERE id = ? FOR UPDATE', [rowId]);
      const taking = outcome(takerLocks.acquire(key, { timeoutMs: 2_500 }));
      // The takeover waits for the row (the sessions' lock waits are 1 s: the extend must land inside it).
      assert.ok(await db.transactionSeen((t) => t.lockWait, 900), 'the takeover waits for the holder row');
      await other.query(`UPDATE db_lock_log SET expires_at = ${db.sql.ago(-30_000)} WHERE id = ?`, [rowId]);
      await other.commit();
      const taken = await taking;
      assert.ok(taken.error instanceof LockTimeoutError, `the waiter got ${String(taken.error ?? 'the lock')}`);
      const rows = await db.logRows(key);
      assert.deepEqual(
        rows.map((row) => row.status),
        ['ACQUIRED'],
        'the extended holder is still live, and nobody else was granted',
      );
    } finally {
      await other.rollback().catch(() => undefined);
      await other.end();
    }
    await holder.release();
  });
});
