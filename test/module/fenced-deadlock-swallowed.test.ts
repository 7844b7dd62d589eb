import { after, before, it, describe } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import type { INestApplicationContext } from '@nestjs/common';
import { LockLostError, type LockService } from '../../lib/index.js';
import { TestDatabase } from '../support/test-database.js';
import { createLockApp } from '../support/lock-app.js';

describe('lease: a deadlock inside the fenced work, swallowed by the work', () => {
  let db: TestDatabase;
  let app: INestApplicationContext;
  let locks: LockService;
  before(async () => {
    db = await TestDatabase.create();
    await db.query('CREATE TABLE biz (id INT PRIMARY KEY, v INT) ENGINE=InnoDB');
    await db.query('CREATE TABLE heavy (id INT AUTO_INCREMENT PRIMARY KEY, v INT) ENGINE=InnoDB');
    ({ app, locks } = await createLockApp(db.settings, { janitor: false, escapedWrites: 'ignore' }, { poolSize: 6 }));
  });
  after(async () => {
    await app?.close();
    await db?.drop();
  });

  /** Makes the fenced transaction the victim of a deadlock against a heavier transaction on another session. */
  async function deadlockIn(n: number): Promise<unknown> {
    await db.query('INSERT INTO biz VALUES (?, 0), (?, 0) ON DUPLICATE KEY UPDATE v = 0', [n * 2, n * 2 + 1]);
    const other = await db.session();
    await locks.manager.query('UPDATE biz SET v = 1 WHERE id = ?', [n * 2]);
    await other.query('START TRANSACTION');
    await other.query('INSERT INTO heavy (v) SELECT seq FROM seq_1_to_300');
    await other.query('UPDATE biz SET v = 2 WHERE id = ?', [n * 2 + 1]);
    const blocked = other.query('UPDATE biz SET v = 2 WHERE id = ?', [n * 2]).then(
      () => undefined,
      (e: unknown) => e,
    );
    await sleep(200);
    let caught: unknown;
    try {
      await locks.manager.query('UPDATE biz SET v = 1 WHERE id = ?', [n * 2 + 1]);
    } catch (e) {
      caught = e;
    }
    assert.equal(await blocked, undefined, 'the other session must win');
    await other.query('COMMIT');
    await other.end();
    return caught;
  }

  it('a lock lost after a swallowed deadlock: its later writes must not commit', async () => {
    for (let i = 0; i < 3; i++) {
      const key = `dl-${i}`;
      const outcome = await locks
        .runLocked(key, async () => {
          const caught = await deadlockIn(100 + i);
          assert.match(String((caught as Error)?.message), /[Dd]eadlock/);
          // The lock is lost now (an operator evicts it), before the work writes again.
          await locks.forceRelease(key, 'operator');
          await locks.manager.query('INSERT INTO biz VALUES (?, 42)', [1000 + i]);
          return 'done';
        })
        .then(
          (value) => ({ value }),
          (error: unknown) => ({ error }),
        );
      const rows = await db.query<{ id: number }[]>('SELECT id FROM biz WHERE id = ?', [1000 + i]);
      assert.deepEqual(
        { committedRows: rows.length, outcome: 'error' in outcome ? (outcome.error as Error).name : outcome.value },
        { committedRows: 0, outcome: LockLostError.name },
        'a holder that lost its lock committed business writes',
      );
    }
  });

  it('a deadlock swallowed by the work: the call does not report success for rolled-back work', async () => {
    const key = 'dl-plain';
    const outcome = await locks
      .runLocked(key, async () => {
        await deadlockIn(200);
        await locks.manager.query('INSERT INTO biz VALUES (?, 42)', [2000]);
        return 'done';
      })
      .then(
        (value) => ({ value }),
        (error: unknown) => ({ error }),
      );
    // the work's first write (id 400 -> v 1) was rolled back by the deadlock
    const first = await db.query<{ v: number }[]>('SELECT v FROM biz WHERE id = 400');
    const later = await db.query<{ id: number }[]>('SELECT id FROM biz WHERE id = 2000');
    assert.ok(
      'error' in outcome,
      `call succeeded although its transaction was rolled back: first write v=${first[0]?.v}, later write committed=${later.length}`,
    );
  });
});
