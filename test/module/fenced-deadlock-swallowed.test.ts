import { after, before, it, describe } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import type { INestApplicationContext } from '@nestjs/common';
import { LockLostError, type LockService } from '../../lib/index.js';
import { TestDatabase, databaseTypeOf, serverUrl } from '../support/test-database.js';
import { pgServerUrl, pgTestsRun } from '../support/pg-test-database.js';
import { rawSession } from '../support/raw-session.js';
import { runSql } from '../support/portable-sql.js';
import { driverCodeOf } from '../support/settled.js';
import { createLockApp, endedStatuses } from '../support/lock-app.js';

const PG = await pgTestsRun();

/**
 * InnoDB rolls the whole transaction back on a deadlock; PostgreSQL fails the victim's statement
 * and leaves the transaction aborted (later statements fail, and a COMMIT answers ROLLBACK without
 * an error). Either way the work that swallowed the error must neither be reported as committed
 * nor commit anything, so the same scenarios run on both servers.
 */
for (const server of [serverUrl(), pgServerUrl()]) {
  const postgres = databaseTypeOf(server) === 'postgres';
  const skip = postgres && !PG ? 'no PostgreSQL server' : false;
  const deadlock = postgres ? '40P01' : 'ER_LOCK_DEADLOCK';
  describe(`lease: a deadlock inside the fenced work, swallowed by the work [${server.protocol}//${server.host}]`, { skip }, () => {
    let db: TestDatabase;
    let app: INestApplicationContext;
    let locks: LockService;
    before(async () => {
      db = await TestDatabase.create('dblock', { server });
      await db.query(`CREATE TABLE biz (id INT PRIMARY KEY, v INT)${db.sql.tableOptions}`);
      await db.query(`CREATE TABLE heavy (id ${db.sql.autoId}, v INT)${db.sql.tableOptions}`);
      ({ app, locks } = await createLockApp(db.settings, { janitor: false, escapedWrites: 'ignore' }, { poolSize: 6 }));
    });
    after(async () => {
      await app?.close();
      await db?.drop();
    });

    /**
     * Makes the fenced transaction the victim of a deadlock on its update of row n*2+1 against
     * another session, which wins and commits; answers what the fenced statement threw.
     */
    async function deadlockIn(n: number): Promise<unknown> {
      await db.query(`INSERT INTO biz VALUES (?, 0), (?, 0) ${db.sql.onDuplicateKey('id', 'v = 0')}`, [n * 2, n * 2 + 1]);
      const other = await rawSession(db.settings);
      await runSql(locks.manager, 'UPDATE biz SET v = 1 WHERE id = ?', [n * 2]);
      await other.begin();
      // InnoDB picks the transaction that wrote fewer rows as its victim: the other one writes many more.
      if (!postgres) await other.query('INSERT INTO heavy (v) SELECT seq FROM seq_1_to_300');
      await other.query('UPDATE biz SET v = 2 WHERE id = ?', [n * 2 + 1]);
      let blocked: Promise<unknown>;
      let caught: unknown;
      const fenced = runSql(locks.manager, 'UPDATE biz SET v = 1 WHERE id = ?', [n * 2 + 1]).then(
        () => undefined,
        (e: unknown) => (caught = e),
      );
      if (postgres) {
        // PostgreSQL's victim is the backend whose own check (deadlock_timeout after it began to
        // wait) finds the cycle: the fenced statement waits first, so its check comes first.
        await sleep(200);
        blocked = other.query('UPDATE biz SET v = 2 WHERE id = ?', [n * 2]).then(
          () => undefined,
          (e: unknown) => e,
        );
      } else {
        blocked = other.query('UPDATE biz SET v = 2 WHERE id = ?', [n * 2]).then(
          () => undefined,
          (e: unknown) => e,
        );
        await sleep(200);
      }
      await fenced;
      assert.equal(await blocked, undefined, 'the other session must win');
      await other.commit();
      await other.end();
      // The scenario is void unless the fenced statement itself was the deadlock's victim.
      assert.equal(driverCodeOf(caught), deadlock, `the fenced statement was not the deadlock victim: ${String(caught)}`);
      return caught;
    }

    it('a lock lost after a swallowed deadlock: its later writes must not commit', async () => {
      for (let i = 0; i < 3; i++) {
        const key = `dl-${i}`;
        const outcome = await locks
          .runLocked(key, async () => {
            await deadlockIn(100 + i);
            // The lock is lost now (an operator evicts it), before the work writes again.
            await locks.forceRelease(key, 'operator');
            await runSql(locks.manager, 'INSERT INTO biz VALUES (?, 42)', [1000 + i]);
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
        // The eviction ends the row RELEASED with its note; a RELEASED row without it would be the work's commit.
        await endedStatuses(db, key);
        const ends = (await db.logRows(key)).map((r) => [r.status, r.note]);
        assert.deepEqual(ends, [['RELEASED', 'force-released: operator']], 'the lock was ended as if its work had committed');
      }
    });

    it('a deadlock swallowed by the work: the call does not report success for rolled-back work', async () => {
      const key = 'dl-plain';
      const outcome = await locks
        .runLocked(key, async () => {
          await deadlockIn(200);
          await runSql(locks.manager, 'INSERT INTO biz VALUES (?, 42)', [2000]);
          return 'done';
        })
        .then(
          (value) => ({ value }),
          (error: unknown) => ({ error }),
        );
      // The work's first write (id 400 -> v 1) went with the deadlock; the other session's (v 2) committed.
      const first = await db.query<{ v: number }[]>('SELECT v FROM biz WHERE id = 400');
      const later = await db.query<{ id: number }[]>('SELECT id FROM biz WHERE id = 2000');
      assert.ok(
        'error' in outcome,
        `call succeeded although its transaction was rolled back: first write v=${first[0]?.v}, later write committed=${later.length}`,
      );
      assert.deepEqual({ first: first[0]?.v, later: later.length }, { first: 2, later: 0 }, 'a write of the deadlocked work committed');
      assert.ok(!(await endedStatuses(db, key)).includes('RELEASED'), 'the lock was ended as if its work had committed');
    });

    it('a deadlock swallowed by work that then returns: the call fails with LockLostError and nothing commits', async () => {
      const key = 'dl-quiet';
      const outcome = await locks
        .runLocked(key, async () => {
          await deadlockIn(300);
          return 'done';
        })
        .then(
          (value) => ({ value }),
          (error: unknown) => ({ error }),
        );
      const first = await db.query<{ v: number }[]>('SELECT v FROM biz WHERE id = 600');
      const error = 'error' in outcome ? (outcome.error as Error) : undefined;
      assert.deepEqual(
        { outcome: error?.name ?? outcome, cause: driverCodeOf(error?.cause), firstWrite: first[0]?.v, ends: await endedStatuses(db, key) },
        { outcome: LockLostError.name, cause: deadlock, firstWrite: 2, ends: ['FAILED'] },
        `the call must fail with LockLostError (cause: the deadlock) and commit nothing: ${String(error)}`,
      );
    });
  });
}
