import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import { DbLockError, type LockService } from '../../lib/index.js';
import { ANSWER_BOUND_MS } from '../../lib/store/answer-bound.js';
import { TestDatabase } from '../support/test-database.js';
import { killSession } from '../support/server-sessions.js';
import { createLockApp } from '../support/lock-app.js';
import { contractSuite } from '../support/contract-targets.js';

/**
 * A release is a round trip like any other: when its answer does not come (here a trigger makes the
 * release's UPDATE sleep far longer than any lock statement may take), the caller gets a typed
 * error once ANSWER_BOUND_MS has passed, and the lease runs out on its own. Without that bound the
 * caller waited as long as the server did, for ever if the answer was lost. On PostgreSQL the
 * trigger is a PL/pgSQL function (pg_sleep), and its count a sequence: nextval is not rolled back,
 * as MySQL's MEMORY table is not, so the count survives the statement held up.
 */
contractSuite('lease-mechanics', 'a release whose answer does not come', { postgres: true }, (target) => {
  const KEY = 'release:no-answer';
  const SERVER_SLEEP_S = 60;
  let db: TestDatabase;
  let app: INestApplicationContext;
  let locks: LockService;

  before(async () => {
    db = await TestDatabase.forTarget(target);
    ({ app, locks } = await createLockApp(db.settings, { ...target.options(), janitor: false }));
    if (db.type === 'postgres') return createPgTrigger();
    // Not transactional, so the count survives the statement the trigger holds up.
    await db.query('CREATE TABLE inject_sleep (n INT NOT NULL) ENGINE=MEMORY');
    await db.query('INSERT INTO inject_sleep VALUES (0)');
    await db.query(
      `CREATE TRIGGER inject_sleep_bu BEFORE UPDATE ON db_lock_log FOR EACH ROW BEGIN
         IF OLD.lock_key = ? AND NEW.ended_at IS NOT NULL AND (SELECT n FROM inject_sleep) > 0 THEN
           UPDATE inject_sleep SET n = n - 1;
           DO SLEEP(${SERVER_SLEEP_S});
         END IF;
       END`,
      [Buffer.from(KEY)],
    );
  });
  /** The same trigger on PostgreSQL: it sleeps while the sequence's count has not passed inject_sleep.n. */
  async function createPgTrigger(): Promise<void> {
    await db.query('CREATE TABLE inject_sleep (n INT NOT NULL)');
    await db.query('INSERT INTO inject_sleep VALUES (0)');
    await db.query('CREATE SEQUENCE inject_sleep_hits');
    await db.query(
      `CREATE FUNCTION inject_sleep_fn() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
         IF OLD.lock_key = decode('${Buffer.from(KEY).toString('hex')}', 'hex') AND NEW.ended_at IS NOT NULL THEN
           IF nextval('inject_sleep_hits') <= (SELECT n FROM inject_sleep) THEN
             PERFORM pg_sleep(${SERVER_SLEEP_S});
           END IF;
         END IF;
         RETURN NEW;
       END $$`,
    );
    await db.query('CREATE TRIGGER inject_sleep_bu BEFORE UPDATE ON db_lock_log FOR EACH ROW EXECUTE FUNCTION inject_sleep_fn()');
  }

  /** Whether the trigger held a release up (MySQL: its count went down; PostgreSQL: the sequence counted one). */
  async function heldUp(): Promise<boolean> {
    if (db.type !== 'postgres') return Number((await db.query<{ n: number }[]>('SELECT n FROM inject_sleep'))[0]!.n) === 0;
    const [hits] = await db.query<{ n: string }[]>('SELECT CASE WHEN is_called THEN last_value ELSE 0 END AS n FROM inject_sleep_hits');
    return Number(hits!.n) >= 1;
  }

  after(async () => {
    // The held-up statement still runs on the server: end it, so the database drops at once.
    const sleepers = await db.query<{ id: number }[]>(
      db.type === 'postgres'
        ? "SELECT pid AS id FROM pg_stat_activity WHERE datname = ? AND pid <> pg_backend_pid() AND query LIKE 'UPDATE%db_lock_log%'"
        : "SELECT id FROM information_schema.PROCESSLIST WHERE DB = ? AND INFO LIKE 'UPDATE%db_lock_log%'",
      [db.name],
    );
    for (const { id } of sleepers) await killSession(db, Number(id)).catch(() => undefined);
    await app?.close();
    await db?.drop();
  });

  it(`fails typed after ANSWER_BOUND_MS (${ANSWER_BOUND_MS} ms), long before the server answers`, async (t) => {
    await db.query('UPDATE inject_sleep SET n = 1');
    const held = await locks.acquire(KEY);
    const started = performance.now();
    const error = await held.release().then(
      () => undefined,
      (e: unknown) => e,
    );
    const tookMs = performance.now() - started;
    t.diagnostic(`release gave up after ${Math.round(tookMs)} ms: ${String(error)}`);
    assert.ok(await heldUp(), 'the release was held up on the server');
    assert.ok(error instanceof DbLockError, `a typed error, got ${String(error)}`);
    // Margin: the bound, plus 3 s for the grant and a loaded 2-core machine; the server would answer only after 60 s.
    assert.ok(tookMs >= ANSWER_BOUND_MS - 50, `gave up after ${Math.round(tookMs)} ms, before the bound`);
    assert.ok(tookMs < ANSWER_BOUND_MS + 3_000, `gave up after ${Math.round(tookMs)} ms`);
  });
});
