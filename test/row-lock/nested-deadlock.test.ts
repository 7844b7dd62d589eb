import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import { type LockHandle, LockLostError, type LockService } from '../../lib/index.js';
import { createLockApp, eventually } from '../support/lock-app.js';
import { runSql } from '../support/portable-sql.js';
import { TestDatabase } from '../support/test-database.js';
import { contractSuite } from '../support/contract-targets.js';

/**
 * Two row-lock holders, each taking the other's key in a nested call inside its own transaction
 * (k1 then k2, and k2 then k1), deadlock in the server. On MySQL/MariaDB InnoDB resolves it by
 * rolling back one of the two whole transactions, its outer key's row lock and its work included.
 * On PostgreSQL the deadlock detector fails the victim's waiting statement with 40P01 and its whole
 * transaction aborts; the nested take runs under a savepoint, but rolling back only to that and
 * carrying on would keep the outer lock, and the take's next try would close the cycle again. The
 * victim must not go on as a holder (its later statements would run in autocommit beside the next
 * holder of its key): its nested call rejects with LockLostError (which `onLocked: 'skip'` does not
 * swallow), its signal aborts, none of its work commits and its audit row does not say RELEASED.
 * The survivor commits.
 */
contractSuite('holder-connection', 'row-lock: a nested take that deadlocks with another holder', { postgres: true }, (target) => {
  let db: TestDatabase;
  let app: INestApplicationContext;
  let locks: LockService;
  before(async () => {
    db = await TestDatabase.forTarget(target);
    await db.query(`CREATE TABLE work (id ${db.sql.autoId}, note VARCHAR(32))${db.sql.tableOptions}`);
    ({ app, locks } = await createLockApp(db.settings, target.options({ escapedWrites: 'ignore' })));
  });
  after(async () => {
    await app?.close();
    await db?.drop();
  });

  it('the deadlock victim loses its outer lock and all its work; the survivor commits', async () => {
    // The key rows exist first: nested first uses would take another path.
    await locks.runLocked('dl:1', async () => undefined);
    await locks.runLocked('dl:2', async () => undefined);

    let bothHold!: () => void;
    const holding = new Promise<void>((resolve) => (bothHold = resolve));
    let held = 0;
    const handles: Record<string, LockHandle> = {};
    const holder = (name: string, outer: string, inner: string, goSecond: boolean) =>
      locks.runLocked(
        outer,
        async (lock) => {
          handles[name] = lock;
          await runSql(locks.manager, 'INSERT INTO work (note) VALUES (?)', [`${name}:before`]);
          if (++held === 2) bothHold();
          await holding;
          // The first holder's nested take waits in the server; the second closes the cycle.
          if (goSecond) await eventually(async () => (await db.lockWaits()) >= 1, 5_000, 'the first nested take waiting in the server');
          await locks.runLocked(inner, async () => 'ran', { onLocked: 'skip', timeoutMs: 5_000 });
          await runSql(locks.manager, 'INSERT INTO work (note) VALUES (?)', [`${name}:after`]);
        },
        { timeoutMs: 10_000 },
      );

    const outcomes = await Promise.allSettled([holder('A', 'dl:1', 'dl:2', false), holder('B', 'dl:2', 'dl:1', true)]);
    const notes = (await db.query<{ note: string }[]>('SELECT note FROM work ORDER BY id')).map((r) => r.note);
    const report = JSON.stringify({ outcomes: outcomes.map((o) => (o.status === 'fulfilled' ? 'ok' : String(o.reason))), notes });
    const failed = outcomes.flatMap((o, i) => (o.status === 'rejected' ? [i] : []));
    assert.equal(failed.length, 1, `one deadlock victim, one survivor: ${report}`);
    const [victim, survivor] = failed[0] === 0 ? ['A', 'B'] : ['B', 'A'];
    assert.ok((outcomes[failed[0]!] as PromiseRejectedResult).reason instanceof LockLostError, `the victim hears LockLostError: ${report}`);
    assert.equal(handles[victim!]!.signal.aborted, true, `the victim's signal aborted: ${report}`);
    assert.deepEqual(notes, [`${survivor}:before`, `${survivor}:after`], `only the survivor's work committed: ${report}`);
    const victimKey = victim === 'A' ? 'dl:1' : 'dl:2';
    // Its audit row is written after the rollback, batched: EXPIRED, saying why. (The survivor's nested hold of the same key follows it, RELEASED.)
    const isVictims = (r: Record<string, unknown>) => r.status === 'EXPIRED' && /deadlock/.test(String(r.note ?? ''));
    await eventually(async () => (await db.logRows(victimKey)).some(isVictims), 5_000, "the victim's audit row");
  });
});
