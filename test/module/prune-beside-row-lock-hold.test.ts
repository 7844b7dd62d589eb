/**
 * The janitor's prune beside a row-lock holder of a key whose old lease rows are past the retention.
 *
 * operations.md: the janitor "deletes terminal log rows whose ended_at is older than
 * janitor.logRetentionMs", "skipping any row someone has locked right now (a row-lock holder's key is
 * in use: the janitor never waits on a holder)", and "Every statement touches at most batchSize rows
 * ... so none holds many row locks". A key may be used by both strategies (the log is shared).
 *
 * What the prune touches differs:
 * - MySQL/MariaDB, where tokens are claimed (AddTokenClaims): each prune batch first lifts the key
 *   rows of the rows it deletes (`UPDATE db_lock k JOIN ...`); that UPDATE needs the key row, which
 *   a row-lock writer keeps locked for its whole hold, so the held key's old rows wait for a later
 *   run (skipped, not waited for) and the other key's rows go.
 * - PostgreSQL: the key row keeps the key's token itself, and the prune is one statement deleting
 *   log rows only (no key row read or locked). A row-lock holder locks its key row and has no log
 *   row until its commit, so nothing the prune needs is locked: both keys' old rows go at once.
 *
 * The time that passed since the old lease hold is played by moving its row's times back (as if it
 * had ended 20 minutes ago).
 */
import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import { contractSuite } from '../support/contract-targets.js';
import { createLockApp } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';
import type { JanitorReport, LockService } from '../../lib/index.js';
import { mysqlLogOf } from '../support/lock-internals.js';

contractSuite('lease-janitor', 'prune beside a row-lock hold', { postgres: true }, (target) => {
  let db: TestDatabase;
  let app: INestApplicationContext;
  let locks: LockService;

  before(async () => {
    db = await TestDatabase.forTarget(target);
    ({ app, locks } = await createLockApp(
      db.settings,
      target.options({
        leaseMs: 5_000,
        janitor: { intervalMs: 3_600_000, idleKeyMs: Infinity, batchSize: 1000, logRetentionMs: 60_000 },
      }),
    ));
  });
  after(async () => {
    await app?.close();
    await db?.drop();
  });

  it('a row-lock hold on a key does not stop the janitor from pruning the log (it never waits on a holder)', { timeout: 30_000 }, async () => {
    const postgres = target.database === 'postgres';
    if (!postgres) assert.equal(mysqlLogOf(locks).schema.claims, true);
    const { keyText, ago } = db.sql;
    const twentyMinutesEarlier = (column: string) => (postgres ? `${column} - interval '20 minutes'` : `${column} - INTERVAL 20 MINUTE`);
    const movedBack = `acquired_at = ${twentyMinutesEarlier('acquired_at')}, expires_at = ${twentyMinutesEarlier('expires_at')}, ended_at = ${twentyMinutesEarlier('ended_at')}`;
    // An old lease hold of the key, ended 20 minutes ago (past the retention and the claims' keep time).
    const lease = await locks.acquire('mixed:k');
    await lease.release();
    await db.query(`UPDATE db_lock_log SET ${movedBack} WHERE lock_key = 'mixed:k'`);
    // Other old rows on another key, to be pruned as well.
    const other = await locks.acquire('other:k');
    await other.release();
    await db.query(`UPDATE db_lock_log SET ${movedBack} WHERE lock_key = 'other:k'`);
    const held = await locks.acquire('mixed:k', { strategy: 'row-lock', timeoutMs: 5_000 });
    let outcome: { report?: JanitorReport; error?: string; ms: number };
    try {
      const startedAt = performance.now();
      outcome = await locks.runJanitor().then(
        (report) => ({ report, ms: Math.round(performance.now() - startedAt) }),
        (e: Error) => ({ error: `${e.name}: ${e.message}`, ms: Math.round(performance.now() - startedAt) }),
      );
    } finally {
      await held.release();
    }
    const oldRows = `SELECT ${keyText('lock_key')} AS k, status FROM db_lock_log WHERE ended_at < ${ago(10 * 60_000)}`;
    const left = await db.query<{ k: string; status: string }[]>(oldRows);
    assert.ok(
      outcome.error === undefined && outcome.report?.complete === true && outcome.ms < 2_000,
      `the janitor run beside the row-lock holder: ${JSON.stringify(outcome)}; old rows left unpruned: ${JSON.stringify(left)}`,
    );
    assert.deepEqual(
      left.map((r) => r.k),
      // MySQL: the held key's claim stays while its key row is locked (it could not be lifted above it); the other key's rows go.
      // PostgreSQL: the prune needs no key row, so the held key's old rows go too.
      postgres ? [] : ['mixed:k'],
      `old ended rows left beside the holder: ${JSON.stringify(left)}`,
    );
    assert.equal(outcome.report!.pruned, postgres ? 2 : 1, `rows the run beside the holder pruned: ${JSON.stringify(outcome)}`);
    await locks.runJanitor();
    const after = await db.query<{ k: string }[]>(oldRows);
    assert.equal(after.length, 0, `old ended rows left once the holder committed: ${JSON.stringify(after)}`);
  });
});
