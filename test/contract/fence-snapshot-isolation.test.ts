import 'reflect-metadata';
import { it } from 'node:test';
import assert from 'node:assert/strict';
import { Injectable } from '@nestjs/common';
import { LockService, WriteLock } from '../../lib/index.js';
import { createLockApp, eventually } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';
import { contractSuite } from '../support/contract-targets.js';
import { runSql, typeOfQueryable } from '../support/portable-sql.js';
import { createEntries } from './scenarios/entries.js';

/**
 * The fence commits after renewals at READ COMMITTED and at REPEATABLE READ, on servers that refuse
 * to write a row changed since the transaction's snapshot: MariaDB >= 11.6.2 with its default
 * innodb_snapshot_isolation (turned on here for the session), PostgreSQL at REPEATABLE READ always
 * ("could not serialize access due to concurrent update"). Renewals write the process's lease row,
 * never the holder's log row, so the fence never writes a row changed after the snapshot began.
 */
@Injectable()
class SnapshotProbe {
  constructor(readonly locks: LockService) {}

  @WriteLock('snap:rc', { leaseMs: 150 })
  async readCommitted(): Promise<void> {
    await this.work();
  }

  @WriteLock('snap:rr', { leaseMs: 150, isolationLevel: 'REPEATABLE READ' })
  async repeatableRead(): Promise<void> {
    await this.work();
  }

  /** Reads (which starts the snapshot at REPEATABLE READ), then waits until the watchdog has renewed the lock at least twice. */
  private async work(): Promise<void> {
    const manager = this.locks.manager;
    if (typeOfQueryable(manager) === 'mysql') await manager.query('SET SESSION innodb_snapshot_isolation = ON');
    await manager.query('SELECT COUNT(*) FROM db_lock_log');
    // Renewals touch the process row (lease); a row-lock holder has none and is checked without them.
    if (this.locks.currentLock!.strategy === 'lease') {
      const renewals = this.locks.stats().renewals;
      await eventually(() => this.locks.stats().renewals >= renewals + 2, 5000, 'two renewals');
    }
    await runSql(manager, 'INSERT INTO entries (k, who) VALUES (?, ?)', ['snap', 'probe']);
  }
}

contractSuite('fenced-decorators', 'decorators: the fence under snapshot isolation', { postgres: true }, (target) => {
  it('commits after renewals at READ COMMITTED (the default) and at REPEATABLE READ: no write-conflict error', async () => {
    const db = await TestDatabase.forTarget(target);
    await createEntries(db);
    // Own app: the session variable stays on its pooled connections, which close with it.
    const { app } = await createLockApp(db.settings, target.options(), { providers: [SnapshotProbe] });
    try {
      const probe = app.get(SnapshotProbe);
      await probe.readCommitted();
      assert.deepEqual(
        (await db.logRows('snap:rc')).map((r) => r.status),
        ['RELEASED'],
      );
      // Before renewals moved to the process row, this one failed with 1020 "Record has changed since last read" on MariaDB.
      await probe.repeatableRead();
      assert.deepEqual(
        (await db.logRows('snap:rr')).map((r) => r.status),
        ['RELEASED'],
      );
      assert.equal((await db.query<unknown[]>('SELECT * FROM entries')).length, 2, 'both writes exist');
    } finally {
      await app.close();
      await db.drop();
    }
  });
});
