import { after, before, it, describe } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import type { INestApplicationContext } from '@nestjs/common';
import type { LockService } from '../../lib/index.js';
import { TestDatabase, databaseTypeOf, serverUrl } from '../support/test-database.js';
import { pgServerUrl, pgTestsRun } from '../support/pg-test-database.js';
import { rawSession } from '../support/raw-session.js';
import { runSql } from '../support/portable-sql.js';
import { driverCodeOf } from '../support/settled.js';
import { createLockApp } from '../support/lock-app.js';

const PG = await pgTestsRun();

/**
 * A row-lock hold is its transaction: InnoDB's deadlock rollback gives the key away at once, while
 * PostgreSQL leaves the transaction aborted (its row locks kept until ROLLBACK, later statements
 * failing). On both servers the holder must not be outlived by a second holder unaware, its later
 * writes must fail, and nothing of its work may commit.
 */
for (const server of [serverUrl(), pgServerUrl()]) {
  const postgres = databaseTypeOf(server) === 'postgres';
  const skip = postgres && !PG ? 'no PostgreSQL server' : false;
  const deadlock = postgres ? '40P01' : 'ER_LOCK_DEADLOCK';
  describe(`row-lock: a deadlock inside the fenced work, swallowed by the work [${server.protocol}//${server.host}]`, { skip }, () => {
    let db: TestDatabase;
    let a: INestApplicationContext;
    let b: INestApplicationContext;
    let locksA: LockService;
    let locksB: LockService;
    before(async () => {
      db = await TestDatabase.create('dblock', { server });
      await db.query(`CREATE TABLE biz (id INT PRIMARY KEY, v INT)${db.sql.tableOptions}`);
      await db.query(`CREATE TABLE heavy (id ${db.sql.autoId}, v INT)${db.sql.tableOptions}`);
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
        let caught: unknown;
        const first = locksA
          .runLocked(key, async (handle) => {
            handle.signal.addEventListener('abort', () => (lostAt = performance.now()));
            const other = await rawSession(db.settings);
            await runSql(locksA.manager, 'UPDATE biz SET v = 1 WHERE id = ?', [n * 2]);
            await other.begin();
            // InnoDB picks the transaction that wrote fewer rows as its victim: the other one writes many more.
            if (!postgres) await other.query('INSERT INTO heavy (v) SELECT seq FROM seq_1_to_300');
            await other.query('UPDATE biz SET v = 2 WHERE id = ?', [n * 2 + 1]);
            let blocked: Promise<unknown>;
            const fenced = runSql(locksA.manager, 'UPDATE biz SET v = 1 WHERE id = ?', [n * 2 + 1]).catch((e: unknown) => (caught = e));
            if (postgres) {
              // PostgreSQL's victim is the backend whose own check (deadlock_timeout after it began
              // to wait) finds the cycle: the fenced statement waits first, so its check comes first.
              await sleep(200);
              blocked = other.query('UPDATE biz SET v = 2 WHERE id = ?', [n * 2]);
            } else {
              blocked = other.query('UPDATE biz SET v = 2 WHERE id = ?', [n * 2]);
              await sleep(200);
            }
            await fenced;
            await blocked;
            await other.commit();
            await other.end();
            await sleep(1500); // still inside the locked call
            // A write after the swallowed deadlock: it must fail, not commit on its own outside the lock.
            try {
              await runSql(locksA.manager, 'INSERT INTO biz VALUES (?, 7)', [1000 + n]);
              lateWrite = 'committed';
            } catch {
              lateWrite = 'failed';
            }
            inside = false;
            return 'done';
          })
          .then(
            (v) => ({ v }),
            (e: unknown) => ({ e }),
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
        results.push({ outcome: String('e' in outcome ? outcome.e : outcome.v), lateWrite });
        // The scenario is void unless the fenced statement itself was the deadlock's victim.
        assert.equal(driverCodeOf(caught), deadlock, `the fenced statement was not the deadlock victim: ${String(caught)}`);
        const [late] = await db.query<{ n: number }[]>('SELECT COUNT(*) AS n FROM biz WHERE id = ?', [1000 + n]);
        const [firstWrite] = await db.query<{ v: number }[]>('SELECT v FROM biz WHERE id = ?', [n * 2]);
        const released = (await db.logRows(key)).filter((r) => r.status === 'RELEASED').length;
        const error = 'e' in outcome ? (outcome.e as Error) : undefined;
        assert.deepEqual(
          {
            outcome: error?.name ?? outcome,
            cause: driverCodeOf(error?.cause),
            told: lostAt < Infinity,
            lateWrite,
            lateCommitted: Number(late!.n),
            firstWrite: firstWrite!.v,
            // The second holder's own hold is the only one that may have ended as committed.
            releasedBeyondSecond: released - (second ? 1 : 0),
          },
          { outcome: 'LockLostError', cause: deadlock, told: true, lateWrite: 'failed', lateCommitted: 0, firstWrite: 2, releasedBeyondSecond: 0 },
          `after a swallowed deadlock the holder must be told, fail with LockLostError (cause: the deadlock), and commit nothing: ${String(error)}`,
        );
        if (!postgres) assert.match(String(error), /^LockLostError: .*rolled back the transaction/);
      }
      assert.deepEqual(
        overlaps,
        [],
        `a second holder got the key before the first was told its lock was lost; first calls: ${JSON.stringify(results)}`,
      );
    });
  });
}
