import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import { createLockApp } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';
import { LockWorker } from '../support/worker-host.js';
import type { LockEvent, LockService } from '../../lib/index.js';
import { contractSuite } from '../support/contract-targets.js';

const scenarios = new URL('../contract/scenarios/liveness.js', import.meta.url).href;

/** 0..9999 without engine-specific sequence tables (the same SQL on MySQL and PostgreSQL). */
const SEQ_10000 =
  `(SELECT a.d + 10 * b.d + 100 * c.d + 1000 * e.d AS n FROM ` +
  ['a', 'b', 'c', 'e']
    .map(
      (t) =>
        `(SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) ${t}`,
    )
    .join(', ') +
  `) seq`;

const DAY_MS = 24 * 3600_000;
const HOUR_MS = 3600_000;

contractSuite('lease-janitor', 'janitor', { postgres: true }, (target) => {
  let db: TestDatabase;
  let app: INestApplicationContext;
  let locks: LockService;
  const events: LockEvent[] = [];
  before(async () => {
    db = await TestDatabase.forTarget(target);
    ({ app, locks } = await createLockApp(
      db.settings,
      target.options({
        // The timer is effectively off here: the test runs the janitor itself.
        janitor: { intervalMs: 3_600_000, batchSize: 1000, logRetentionMs: 24 * 3600_000, idleKeyMs: 3600_000 },
        onEvent: (e) => events.push(e),
      }),
    ));
  });
  after(async () => {
    await app?.close();
    await db?.drop();
  });

  it('reclaims 10,000 expired holders, prunes old log rows and reaps idle keys, in batches of batchSize', async () => {
    // 5,000 terminal rows older than the retention (1 day), 300 recent ones, inserted first: ids follow
    // grant time, and the prune walks ids up to the first row granted within the retention.
    const { ago, uuid, keyOf } = db.sql;
    await db.query(`INSERT INTO db_lock (lock_key, fencing_token, last_granted_at) VALUES ('old', 5300, ${ago(8 * DAY_MS)})`);
    await db.query(
      `INSERT INTO db_lock_log (lock_key, mode, owner, holder, fencing_token, status, lease_ms, acquired_at, expires_at, ended_at) ` +
        `SELECT ${keyOf(`'old'`)}, 'write', ${uuid}, 'gone:1', n + 1, ` +
        `CASE WHEN n < 300 THEN 'RELEASED' WHEN n % 3 = 0 THEN 'RELEASED' WHEN n % 3 = 1 THEN 'FAILED' ELSE 'EXPIRED' END, 30000, ` +
        `${ago(9 * DAY_MS)}, ${ago(9 * DAY_MS)}, ` +
        `CASE WHEN n < 300 THEN ${ago(HOUR_MS)} ELSE ${ago(8 * DAY_MS)} END FROM ${SEQ_10000} WHERE n < 5300`,
    );
    // 10,000 holders whose lease ran out a minute ago (their processes died), keys idle for 2 h.
    await db.query(
      `INSERT INTO db_lock (lock_key, fencing_token, last_granted_at) SELECT ${keyOf(`CONCAT('exp:', n)`)}, n + 1, ${ago(2 * HOUR_MS)} FROM ${SEQ_10000}`,
    );
    await db.query(
      `INSERT INTO db_lock_log (lock_key, mode, owner, holder, fencing_token, status, lease_ms, acquired_at, expires_at) ` +
        `SELECT ${keyOf(`CONCAT('exp:', n)`)}, 'write', ${uuid}, 'dead:1', n + 1, CASE WHEN n % 2 = 0 THEN 'ACQUIRED' ELSE 'COMPLETED' END, 30000, ` +
        `${ago(2 * HOUR_MS)}, ${ago(60_000)} FROM ${SEQ_10000}`,
    );
    // A real, live holder: untouched, and its key row is not idle.
    const live = await locks.acquire('live', { leaseMs: 60_000 });
    events.length = 0;

    const report = await locks.runJanitor();

    assert.equal(report.ran, true);
    assert.equal(report.complete, true);
    assert.equal(report.reclaimed, 10_000);
    assert.equal(report.pruned, 5_000);
    assert.equal(report.reapedKeys, 10_001, "the 10,000 'exp:' keys and 'old'");
    // 10 full batches and one that found nothing left; 5 full + 1 empty; 10 full + 1 partial (1 row).
    assert.deepEqual(report.batches, { reclaim: 11, prune: 6, reap: 11 });
    const reclaimedEvents = events.filter((e) => e.type === 'reclaimed');
    assert.equal(reclaimedEvents.length, 10, 'one reclaimed event per batch');
    for (const e of reclaimedEvents) {
      assert.equal(e.count, 1000, 'each batch touched exactly batchSize rows');
      assert.equal(e.keys.length, 1000);
    }
    assert.ok(!events.some((e) => e.keys.some((k) => k.includes('janitor'))), "the janitor's own lock raises no user events");

    const statuses = await db.query<{ status: string; note: string | null; n: number }[]>(
      `SELECT status, note, COUNT(*) AS n FROM db_lock_log GROUP BY status, note ORDER BY status, note`,
    );
    const counts = Object.fromEntries(statuses.map((r) => [`${r.status}:${r.note ?? ''}`, Number(r.n)]));
    assert.equal(counts['EXPIRED:reclaimed by janitor'], 10_000);
    assert.equal(counts['RELEASED:'], 300 + 1 /* the janitor's own run */, 'recent terminal rows are kept');
    assert.equal(counts['ACQUIRED:'], 1, 'the live holder is untouched');
    assert.equal(counts['FAILED:'], undefined, 'old FAILED rows were pruned');
    const keys = await db.query<{ k: Buffer }[]>(`SELECT lock_key AS k FROM db_lock WHERE lock_key < ?`, [Buffer.from([0xff])]);
    assert.deepEqual(
      keys.map((r) => Buffer.from(r.k).toString()),
      ['live'],
    );

    const stats = locks.stats();
    assert.equal(stats.janitor.runs, 1);
    assert.equal(stats.janitor.reclaimed, 10_000);
    assert.equal(stats.janitor.pruned, 5_000);
    assert.equal(stats.janitor.reapedKeys, 10_001);
    assert.equal(stats.janitor.batches, 11 + 6 + 11);
    assert.equal(stats.held, 1, "the janitor's lock is not counted as a user lock");
    await live.release();
  });

  it('a reaped key comes back with a larger fencing token (tokens are never reset)', async () => {
    // 'exp:5' was reaped with token 6; the floor holds the largest reaped token (10,000 for 'exp:9999').
    const again = await locks.acquire('exp:5');
    assert.ok(again.fencingToken > 10_000, `token ${again.fencingToken} continues above every reaped token`);
    await again.release();
  });

  it('with three processes running janitors every 100 ms, never two janitors at once', async () => {
    const { timestamp, tableOptions, micros } = db.sql;
    await db.query(`CREATE TABLE janitor_runs (id CHAR(36) PRIMARY KEY, pid INT, started_at ${timestamp}, ended_at ${timestamp})${tableOptions}`);
    const workers = await LockWorker.startMany(3, {
      settings: db.settings,
      options: target.options({ leaseMs: 2000, janitor: { intervalMs: 100, batchSize: 50 } }),
    });
    try {
      const results = await Promise.all(
        workers.map((w) =>
          w.run<{ runs: number; skipped: number; recorded: number }>(scenarios, 'observeJanitor', { durationMs: 3000, extraWorkMs: 30 }),
        ),
      );
      // Server times in exact microseconds (from 2000-01-01) on both servers.
      const runs = await db.query<{ pid: number; started_us: string; ended_us: string | null }[]>(
        `SELECT pid, ${micros('started_at')} AS started_us, ${micros('ended_at')} AS ended_us FROM janitor_runs ORDER BY started_at, id`,
      );
      const finished = runs.filter((r) => r.ended_us !== null);
      assert.ok(finished.length >= 10, `janitors ran (${finished.length} recorded runs)`);
      for (let i = 1; i < runs.length; i++) {
        const previous = runs[i - 1]!;
        assert.ok(
          previous.ended_us !== null && Number(previous.ended_us) <= Number(runs[i]!.started_us),
          `runs overlap: ${JSON.stringify([previous, runs[i]])}`,
        );
      }
      assert.ok(new Set(finished.map((r) => r.pid)).size >= 2, 'the janitor moved between nodes');
      assert.ok(results.reduce((n, r) => n + r.skipped, 0) > 0, 'some tries found another janitor running and skipped');
    } finally {
      await Promise.all(workers.map((w) => w.close()));
    }
  });
  it('prunes in id order up to the first row granted within the retention; an older row after it waits for a later run', async () => {
    await db.query(`DELETE FROM db_lock_log`);
    let token = 0;
    const row = (status: string, acquired: string, ended: string) =>
      db.query(
        `INSERT INTO db_lock_log (lock_key, mode, owner, holder, fencing_token, status, lease_ms, acquired_at, expires_at, ended_at) ` +
          `VALUES ('order', 'write', ${db.sql.uuid}, 'order:1', ${++token}, '${status}', 30000, ${acquired}, ${acquired}, ${ended})`,
      );
    const old = [db.sql.ago(9 * DAY_MS), db.sql.ago(8 * DAY_MS)] as const;
    await row('RELEASED', ...old);
    await row('RELEASED', db.sql.utcNow, db.sql.utcNow);
    await row('FAILED', ...old); // granted out of id order: after a recent row
    const remaining = async () =>
      (await db.query<{ status: string }[]>(`SELECT status FROM db_lock_log WHERE holder = 'order:1' ORDER BY id`)).map((r) => r.status);

    assert.equal((await locks.runJanitor()).pruned, 1, 'the old row below the recent one');
    assert.deepEqual(await remaining(), ['RELEASED', 'FAILED'], 'the recent row is kept, and so is the old row after it, for now');

    // The recent row ages past the retention: the next run walks on from where the last one stopped.
    await db.query(`UPDATE db_lock_log SET acquired_at = ${old[0]}, ended_at = ${old[1]} WHERE holder = 'order:1' AND status = 'RELEASED'`);
    assert.equal((await locks.runJanitor()).pruned, 2);
    assert.deepEqual(await remaining(), []);
  });
});
