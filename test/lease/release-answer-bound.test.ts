import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import { DbLockError, type LockService } from '../../lib/index.js';
import { ANSWER_BOUND_MS } from '../../lib/store/mysql/mysql-lock-log.js';
import { TestDatabase } from '../support/test-database.js';
import { createLockApp } from '../support/lock-app.js';
import { contractSuite } from '../support/contract-targets.js';

/**
 * A release is a round trip like any other: when its answer does not come (here a trigger makes the
 * release's UPDATE sleep far longer than any lock statement may take), the caller gets a typed
 * error once ANSWER_BOUND_MS has passed, and the lease runs out on its own. Without that bound the
 * caller waited as long as the server did, for ever if the answer was lost.
 */
contractSuite('lease-mechanics', 'a release whose answer does not come', (target) => {
  const KEY = 'release:no-answer';
  const SERVER_SLEEP_S = 60;
  let db: TestDatabase;
  let app: INestApplicationContext;
  let locks: LockService;

  before(async () => {
    db = await TestDatabase.create();
    ({ app, locks } = await createLockApp(db.settings, { ...target.options(), janitor: false }));
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
  after(async () => {
    // The held-up statement still runs on the server: end it, so the database drops at once.
    const sleepers = await db.query<{ id: number }[]>(
      "SELECT id FROM information_schema.PROCESSLIST WHERE DB = ? AND INFO LIKE 'UPDATE%db_lock_log%'",
      [db.name],
    );
    for (const { id } of sleepers) await db.query(`KILL ${Number(id)}`).catch(() => undefined);
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
    assert.equal(Number((await db.query<{ n: number }[]>('SELECT n FROM inject_sleep'))[0]!.n), 0, 'the release was held up on the server');
    assert.ok(error instanceof DbLockError, `a typed error, got ${String(error)}`);
    // Margin: the bound, plus 3 s for the grant and a loaded 2-core machine; the server would answer only after 60 s.
    assert.ok(tookMs >= ANSWER_BOUND_MS - 50, `gave up after ${Math.round(tookMs)} ms, before the bound`);
    assert.ok(tookMs < ANSWER_BOUND_MS + 3_000, `gave up after ${Math.round(tookMs)} ms`);
  });
});
