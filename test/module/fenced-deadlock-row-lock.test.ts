import { after, before, it, describe } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import type { INestApplicationContext } from '@nestjs/common';
import type { LockService } from '../../lib/index.js';
import { TestDatabase } from '../support/test-database.js';
import { createLockApp } from '../support/lock-app.js';

describe('row-lock: a deadlock inside the fenced work, swallowed by the work', () => {
  let db: TestDatabase;
  let a: INestApplicationContext;
  let b: INestApplicationContext;
  let locksA: LockService;
  let locksB: LockService;
  before(async () => {
    db = await TestDatabase.create();
    await db.query('CREATE TABLE biz (id INT PRIMARY KEY, v INT) ENGINE=InnoDB');
    await db.query('CREATE TABLE heavy (id INT AUTO_INCREMENT PRIMARY KEY, v INT) ENGINE=InnoDB');
    ({ app: a, locks: locksA } = await createLockApp(
      db.settings,
      { janitor: false, escapedWrites: 'ignore', strategy: 'row-lock' },
      { poolSize: 6 },
    ));
    ({ app: b, locks: locksB } = await createLockApp(
      db.settings,
      { janitor: false, escapedWrites: 'ignore', strategy: 'row-lock' },
      { poolSize: 6 },
    ));
  });
  after(async () => {
    await b?.close();
    await a?.close();
    await db?.drop();
  });

  it('the first holder is told at once (signal, LockLostError), and its later writes fail instead of committing outside the lock', async () => {
    const overlaps: string[] = [];
    const results: unknown[] = [];
    for (let i = 0; i < 3; i++) {
      const key = `rl-${i}`;
      const n = 10 + i;
      await db.query('INSERT INTO biz VALUES (?, 0), (?, 0)', [n * 2, n * 2 + 1]);
      let inside = true;
      let lostAt = Infinity;
      let lateWrite = 'not tried';
      const first = locksA
        .runLocked(key, async (handle) => {
          handle.signal.addEventListener('abort', () => (lostAt = performance.now()));
          const other = await db.session();
          await locksA.manager.query('UPDATE biz SET v = 1 WHERE id = ?', [n * 2]);
          await other.query('START TRANSACTION');
          await other.query('INSERT INTO heavy (v) SELECT seq FROM seq_1_to_300');
          await other.query('UPDATE biz SET v = 2 WHERE id = ?', [n * 2 + 1]);
          const blocked = other.query('UPDATE biz SET v = 2 WHERE id = ?', [n * 2]);
          await sleep(200);
          await locksA.manager.query('UPDATE biz SET v = 1 WHERE id = ?', [n * 2 + 1]).catch(() => undefined);
          await blocked;
          await other.query('COMMIT');
          await other.end();
          await sleep(1500); // still inside the locked call
          // A write after the swallowed deadlock: it must fail, not commit on its own outside the lock.
          try {
            await locksA.manager.query('INSERT INTO biz VALUES (?, 7)', [1000 + n]);
            lateWrite = 'committed';
          } catch {
            lateWrite = 'failed';
          }
          inside = false;
          return 'done';
        })
        .then(
          (v) => ({ v }),
          (e: unknown) => ({ e: String(e) }),
        );
      await sleep(600);
      const second = await locksB.tryAcquire(key);
      const gotAt = performance.now();
      if (second) {
        // The database gave the key away with the rollback; the first holder must have been told first.
        if (inside && !(lostAt <= gotAt)) overlaps.push(key);
        await second.release();
      }
      const outcome = await first;
      results.push({ ...outcome, lateWrite });
      assert.match(String((outcome as { e?: string }).e), /^LockLostError: .*rolled back the transaction/);
      assert.equal(lateWrite, 'failed');
      const [late] = await db.query<{ n: number }[]>('SELECT COUNT(*) AS n FROM biz WHERE id = ?', [1000 + n]);
      assert.equal(Number(late!.n), 0, 'a write after the swallowed deadlock committed');
    }
    assert.deepEqual(
      overlaps,
      [],
      `a second holder got the key before the first was told its lock was lost; first calls: ${JSON.stringify(results)}`,
    );
  });
});
