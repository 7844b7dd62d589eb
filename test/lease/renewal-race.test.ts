import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { TestDatabase } from '../support/test-database.js';
import { LockWorker } from '../support/worker-host.js';
import { contractSuite } from '../support/contract-targets.js';

const scenarios = new URL('../contract/scenarios/release-race.js', import.meta.url).href;

contractSuite('lease-renewal', 'liveness: a released lock is never renewed back to life', { postgres: true }, (target) => {
  let db: TestDatabase;
  before(async () => {
    db = await TestDatabase.forTarget(target);
    // Exact witness: any write that changes the lease or the status of a row that had already
    // ended (RELEASED/FAILED/EXPIRED) is recorded. (Comparing expires_at with ended_at cannot be
    // exact: NOW() is fixed when a statement starts, not when it gets the row lock.)
    await db.query(
      `CREATE TABLE violations (id ${db.sql.autoId}, log_id BIGINT, old_status VARCHAR(10), new_status VARCHAR(10), old_expires ${db.sql.timestamp}, new_expires ${db.sql.timestamp})`,
    );
    if (db.type === 'postgres') {
      await db.query(
        `CREATE FUNCTION ended_rows_stay_ended() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN ` +
          `IF OLD.status NOT IN ('ACQUIRED', 'COMPLETED') AND (NEW.expires_at IS DISTINCT FROM OLD.expires_at OR NEW.status <> OLD.status) THEN ` +
          `INSERT INTO violations (log_id, old_status, new_status, old_expires, new_expires) VALUES (OLD.id, OLD.status, NEW.status, OLD.expires_at, NEW.expires_at); END IF; ` +
          `RETURN NEW; END $$`,
      );
      await db.query(`CREATE TRIGGER ended_rows_stay_ended BEFORE UPDATE ON db_lock_log FOR EACH ROW EXECUTE FUNCTION ended_rows_stay_ended()`);
      return;
    }
    await db.query(
      `CREATE TRIGGER ended_rows_stay_ended BEFORE UPDATE ON db_lock_log FOR EACH ROW ` +
        `IF OLD.status NOT IN ('ACQUIRED', 'COMPLETED') AND (NEW.expires_at <> OLD.expires_at OR NEW.status <> OLD.status) THEN ` +
        `INSERT INTO violations (log_id, old_status, new_status, old_expires, new_expires) VALUES (OLD.id, OLD.status, NEW.status, OLD.expires_at, NEW.expires_at); END IF`,
    );
  });
  after(async () => {
    await db?.drop();
  });

  it('races releases against a 10 ms watchdog in two processes', async () => {
    // Renewal every 10 ms: a renewal statement is on the wire a large share of the time, so many
    // releases land while one is in flight (counted by the scenario).
    const workers = await LockWorker.startMany(2, { settings: db.settings, options: target.options({ janitor: false, renewIntervalMs: 10 }) });
    try {
      const results = await Promise.all(
        workers.map((w) =>
          w.run<{ releases: number; racedReleases: number; renewals: number; lost: number; trace: string[] }>(scenarios, 'releaseRace', {
            iterations: 400,
            concurrency: 8,
            keys: 4,
            leaseMs: 1000,
            maxHoldMs: 25,
          }),
        ),
      );
      for (const r of results) {
        assert.equal(r.releases, 400);
        assert.equal(r.lost, 0, 'no holder lost its lock');
        assert.ok(r.renewals > 20, `the watchdog ran (${r.renewals} renewal statements)`);
        assert.ok(r.racedReleases > 0, `some releases raced a renewal in flight (${r.racedReleases})`);
      }
      // Nothing live is left, every row stayed RELEASED.
      const statuses = await db.query<{ status: string; n: number }[]>(
        `SELECT status, COUNT(*) AS n FROM db_lock_log GROUP BY status ORDER BY status`,
      );
      assert.deepEqual(
        statuses.map((r) => [r.status, Number(r.n)]),
        [['RELEASED', 800]],
      );
      // No renewal (or anything else) touched a row after it ended.
      assert.deepEqual(await db.query(`SELECT * FROM violations`), [], 'no row was renewed or revived after its release');
      // Per key, holds never overlap: each grant starts after the previous release.
      // The pairs themselves, so that a failure shows its rows (tokens, statuses, server times).
      const overlaps = await db.query<Record<string, unknown>[]>(
        `SELECT a.id AS a_id, b.id AS b_id, a.fencing_token AS a_token, b.fencing_token AS b_token, ${micros(db, 'a.acquired_at')} AS a_acquired, ` +
          `${micros(db, 'a.ended_at')} AS a_ended, ${micros(db, 'b.acquired_at')} AS b_acquired, ${micros(db, 'b.ended_at')} AS b_ended, a.wait_ms AS a_wait, b.wait_ms AS b_wait, ` +
          `a.hold_ms AS a_hold, b.hold_ms AS b_hold, a.owner AS a_owner, b.owner AS b_owner, a.note AS a_note, b.note AS b_note ` +
          `FROM db_lock_log a JOIN db_lock_log b ON b.lock_key = a.lock_key AND b.id > a.id WHERE b.acquired_at < a.ended_at`,
      );
      // On a failure, what the two holders' processes sent about them (client times, ms from each scenario's start).
      const traceOf = (pair: Record<string, unknown>) =>
        results.flatMap((r, i) =>
          r.trace
            .filter((line) => [pair.a_owner, pair.b_owner, `id = ${pair.a_id} `, `id = ${pair.b_id} `].some((s) => line.includes(String(s))))
            .map((line) => `worker ${i}: ${line}`),
        );
      assert.equal(
        overlaps.length,
        0,
        `no key ever had two live holders: ${JSON.stringify(overlaps.slice(0, 5))}\n${overlaps.slice(0, 2).flatMap(traceOf).join('\n')}`,
      );
    } finally {
      await Promise.all(workers.map((w) => w.close()));
    }
  });
});

/** A DATETIME(6) (PostgreSQL: timestamptz) column as text with its microseconds (the driver's Date keeps milliseconds only). */
function micros(db: TestDatabase, column: string): string {
  return db.type === 'postgres' ? `to_char(${column} AT TIME ZONE 'UTC', 'HH24:MI:SS.US')` : `DATE_FORMAT(${column}, '%H:%i:%s.%f')`;
}
