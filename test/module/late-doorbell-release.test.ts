import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import { LockLostError, type LockService } from '../../lib/index.js';
import { ANSWER_BOUND_MS } from '../../lib/store/answer-bound.js';
import { TestDatabase } from '../support/test-database.js';
import { createLockApp } from '../support/lock-app.js';
import { contractSuite } from '../support/contract-targets.js';

/**
 * A lease release whose answer is lost (the client stops waiting at ANSWER_BOUND_MS and cuts its
 * connection) but whose UPDATE still lands on the server a moment later: the retry then finds the
 * row already ended — by this very release. Nobody else ended it (no takeover, no forceRelease,
 * the lease was far from over), so the caller must not be told LockLostError, and the lock must be
 * counted released, not lost (stats, 'lost' event).
 *
 * Made repeatable with a trigger: the release's UPDATE sleeps a little longer than the answer
 * bound (ANSWER_BOUND_MS + 1 s), so the client gives up first and its retries, waiting on the row
 * lock of that UPDATE, run right after it committed. PostgreSQL: a PL/pgSQL trigger function with
 * pg_sleep (the server does not notice the cut connection while it sleeps, so the UPDATE commits).
 */
contractSuite('lease-mechanics', 'a release whose answer is lost but which landed', { postgres: true }, (target) => {
  const KEY = 'release:landed-late';
  const SLEEP_S = Math.ceil(ANSWER_BOUND_MS / 1000) + 1;
  let db: TestDatabase;
  let app: INestApplicationContext;
  let locks: LockService;
  let otherApp: INestApplicationContext;
  let other: LockService;
  const events: string[] = [];

  before(async () => {
    db = await TestDatabase.forTarget(target);
    ({ app, locks } = await createLockApp(
      db.settings,
      target.options({
        janitor: false,
        leaseMs: 120_000,
        onEvent: (event) => {
          if (event.type === 'lost' || event.type === 'released') events.push(event.type);
        },
      }),
    ));
    ({ app: otherApp, locks: other } = await createLockApp(db.settings, target.options({ janitor: false, leaseMs: 120_000 })));
    await db.query(`CREATE TABLE inject_sleep (n INT NOT NULL)${db.type === 'postgres' ? '' : ' ENGINE=MEMORY'}`);
    await db.query('INSERT INTO inject_sleep VALUES (0)');
    if (db.type === 'postgres') {
      await db.query(
        `CREATE FUNCTION inject_sleep_fn() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
           IF OLD.lock_key = '\\x${Buffer.from(KEY).toString('hex')}'::bytea AND NEW.ended_at IS NOT NULL AND (SELECT n FROM inject_sleep) > 0 THEN
             UPDATE inject_sleep SET n = n - 1;
             PERFORM pg_sleep(${SLEEP_S});
           END IF;
           RETURN NEW;
         END $$`,
      );
      await db.query('CREATE TRIGGER inject_sleep_bu BEFORE UPDATE ON db_lock_log FOR EACH ROW EXECUTE FUNCTION inject_sleep_fn()');
    } else
      await db.query(
        `CREATE TRIGGER inject_sleep_bu BEFORE UPDATE ON db_lock_log FOR EACH ROW BEGIN
         IF OLD.lock_key = ? AND NEW.ended_at IS NOT NULL AND (SELECT n FROM inject_sleep) > 0 THEN
           UPDATE inject_sleep SET n = n - 1;
           DO SLEEP(${SLEEP_S});
         END IF;
       END`,
        [Buffer.from(KEY)],
      );
  });
  after(async () => {
    if (db?.type === 'postgres')
      await db.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = ? AND wait_event = 'PgSleep'", [db.name]);
    else if (db) {
      const sleepers = await db.query<{ id: number }[]>(
        "SELECT id FROM information_schema.PROCESSLIST WHERE DB = ? AND INFO LIKE 'UPDATE%db_lock_log%'",
        [db.name],
      );
      for (const { id } of sleepers) await db.query(`KILL ${Number(id)}`).catch(() => undefined);
    }
    await app?.close();
    await otherApp?.close();
    await db?.drop();
  });

  it("the release (through the key's doorbell) that landed after its answer bound is not reported as a lost lock", async (t) => {
    // The holder gets the key after waiting on its doorbell: it holds the bell, and its release goes on the bell's connection.
    const first = await other.acquire(KEY);
    const waiting = locks.acquire(KEY, { timeoutMs: 10_000 });
    await new Promise((r) => setTimeout(r, 500));
    await first.release();
    const held = await waiting;
    const before = locks.stats();
    await db.query('UPDATE inject_sleep SET n = 1');
    const started = performance.now();
    const error = await held.release().then(
      () => undefined,
      (e: unknown) => e,
    );
    t.diagnostic(`release settled after ${Math.round(performance.now() - started)} ms: ${String(error)}`);
    const rows = await db.logRows(KEY);
    const after = locks.stats();
    // The row was ended by this release itself (the trigger held it up; nobody else touched it).
    assert.equal(rows.length, 2);
    assert.equal(rows[1]!.status, 'RELEASED', `the release's own UPDATE landed: ${JSON.stringify(rows[1])}`);
    assert.equal(rows[1]!.note, null, 'no one else (forceRelease, takeover) ended it: no note');
    assert.ok(
      !(error instanceof LockLostError),
      `release() threw LockLostError although the row was ended by this very release (no takeover, no forceRelease, lease far from over): ${String(error)}`,
    );
    assert.equal(after.lost - before.lost, 0, `stats().lost went up by ${after.lost - before.lost} for a lock that was released, not lost`);
    assert.deepEqual(events.slice(-1), ['released'], `events: ${JSON.stringify(events)}`);
  });
});
