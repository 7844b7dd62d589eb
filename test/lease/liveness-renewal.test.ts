import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { TestDatabase } from '../support/test-database.js';
import { rawSession } from '../support/raw-session.js';
import { killSession } from '../support/server-sessions.js';
import { LockWorker } from '../support/worker-host.js';
import { contractSuite } from '../support/contract-targets.js';

const scenarios = new URL('../contract/scenarios/liveness.js', import.meta.url).href;

contractSuite('lease-renewal', 'liveness: watchdog renewal across processes', { postgres: true }, (target) => {
  let db: TestDatabase;
  before(async () => {
    db = await TestDatabase.forTarget(target);
    const { timestamp, autoId, tableOptions } = db.sql;
    await db.query(
      `CREATE TABLE work_log (id CHAR(36) PRIMARY KEY, pid INT, token BIGINT, started_at ${timestamp}, ended_at ${timestamp})${tableOptions}`,
    );
    await db.query(`CREATE TABLE ledger (id ${autoId}, who VARCHAR(64), token BIGINT)${tableOptions}`);
    await db.query(`CREATE TABLE control (name VARCHAR(64) PRIMARY KEY)${tableOptions}`);
  });
  after(async () => {
    await db?.drop();
  });

  it('a holder whose work takes 5x its lease keeps the lock; the others wait; no overlap', async () => {
    // A lease long enough that a renewal late by a loaded host (the suite runs two files at once on
    // two cores) still lands: renewals go every lease/3, so a tick may be about 600 ms late.
    const leaseMs = 1000;
    const workMs = 5 * leaseMs;
    const workers = await LockWorker.startMany(3, { settings: db.settings, options: target.options({ janitor: false }) });
    try {
      const results = await Promise.all(
        workers.map((w) =>
          w.run<{ token: number; aborted: boolean; renewals: number; renewalMaxMs: number; reason: string }>(scenarios, 'longWork', {
            key: 'long',
            workMs,
            leaseMs,
            timeoutMs: 40_000,
          }),
        ),
      );
      for (const r of results) {
        assert.equal(r.aborted, false, `no holder lost its lock (slowest renewal ${Math.round(r.renewalMaxMs)} ms; ${r.reason})`);
        // ~15 ticks at lease/3; at least 3 proves the lease was carried by renewals, not luck.
        assert.ok(r.renewals >= 3, `renewals kept the lease (${r.renewals} renewal statements)`);
      }
      assert.deepEqual(results.map((r) => r.token).sort(), [1, 2, 3]);
      // Server times in exact microseconds (from 2000-01-01) on both servers.
      const rows = await db.query<{ started_us: string; ended_us: string; token: string }[]>(
        `SELECT token, ${db.sql.micros('started_at')} AS started_us, ${db.sql.micros('ended_at')} AS ended_us FROM work_log ORDER BY started_at`,
      );
      assert.equal(rows.length, 3);
      for (let i = 1; i < rows.length; i++) {
        assert.ok(Number(rows[i - 1]!.ended_us) <= Number(rows[i]!.started_us), `work intervals do not overlap: ${JSON.stringify(rows)}`);
        assert.ok(Number(rows[i - 1]!.token) < Number(rows[i]!.token), 'tokens grow in grant order');
      }
      const log = await db.logRows('long');
      assert.deepEqual(
        log.map((r) => r.status),
        ['RELEASED', 'RELEASED', 'RELEASED'],
        'nobody was taken over: every lease was renewed until release',
      );
    } finally {
      await Promise.all(workers.map((w) => w.close()));
    }
  });

  it('renewal connection KILLed until the lease runs out: signal aborts, fenced commit rejected, one committer', async (t) => {
    // MySQL: the victim connects as a user of its own, so that its sessions are told apart from this
    // test's (whose statement text holds the pattern). PostgreSQL: its renewal statement names its
    // process id in this database, and this test's own session is left out by its pid.
    const pg = db.type === 'postgres';
    const user = `dbl_victim_${process.pid}`;
    if (!pg) {
      await db.query(`CREATE USER IF NOT EXISTS '${user}'@'%' IDENTIFIED BY 'victim-pw'`);
      await db.query(`GRANT ALL ON \`${db.name}\`.* TO '${user}'@'%'`);
    }
    const victimSettings = pg ? db.settings : { ...db.settings, user, password: 'victim-pw' };
    const victimWorker = await LockWorker.start({ settings: victimSettings, options: target.options({ janitor: false, renewIntervalMs: 300 }) });
    const takerWorker = await LockWorker.start({ settings: db.settings, options: target.options({ janitor: false }) });
    const blocker = await rawSession(db.settings);
    try {
      let aborted = false;
      let onAcquired!: (data: { owner: string; processId: string; token: number }) => void;
      const acquired = new Promise<{ owner: string; processId: string; token: number }>((r) => (onAcquired = r));
      const victimRun = victimWorker.run<Record<string, unknown>>(
        scenarios,
        'victim',
        { key: 'fenced', leaseMs: 900, business: db.settings },
        (event, data) => {
          if (event === 'acquired') onAcquired(data as { owner: string; processId: string; token: number });
          if (event === 'aborted') aborted = true;
        },
      );
      const { processId, token } = await acquired;
      // Hold the victim process's lease row so every renewal statement sits on the server, then KILL it there.
      await blocker.begin();
      await blocker.query('SELECT id FROM db_lock_process WHERE id = ? FOR UPDATE', [processId]);
      let kills = 0;
      const deadline = performance.now() + 20_000;
      while (!aborted && performance.now() < deadline) {
        const rows = await db.query<{ ID: number }[]>(
          pg
            ? `SELECT pid AS "ID" FROM pg_stat_activity WHERE datname = ? AND pid <> pg_backend_pid() AND state = 'active' AND query LIKE ?`
            : `SELECT ID FROM information_schema.PROCESSLIST WHERE USER = ? AND INFO LIKE ?`,
          [pg ? db.name : user, `%INTO db_lock_process (id, holder, started_at, renewed_at) VALUES (${pg ? processId : `'${processId}'`}%`],
        );
        for (const row of rows) {
          await killSession(db, Number(row.ID)).then(
            () => kills++,
            () => undefined,
          );
        }
        await new Promise((r) => setTimeout(r, 10));
      }
      await blocker.rollback();
      assert.ok(aborted, "the victim's signal aborted");
      assert.ok(kills >= 1, `renewal statements were killed on the server (${kills})`);

      const taken = await takerWorker.run<{ token: number; committed: boolean }>(scenarios, 'taker', {
        key: 'fenced',
        timeoutMs: 15_000,
        business: db.settings,
      });
      assert.equal(taken.committed, true);
      assert.equal(taken.token, token + 1);
      await db.query(`INSERT INTO control (name) VALUES ('fenced')`);
      const result = await victimRun;
      t.diagnostic(`renewal statements killed: ${kills}; the victim: ${JSON.stringify(result)}`);
      assert.equal(result.aborted, true);
      assert.match(String(result.abortReason), /lease ran out before a renewal was confirmed/);
      assert.equal(result.fenceCommitted, false, "the stale holder's fenced commit was rejected");
      assert.equal(result.releaseError, 'LockLostError');
      assert.ok(Number(result.renewalFailures) >= 1, 'renewal failures were counted');
      assert.equal(result.lost, 1);
      const ledger = await db.query<{ who: string; token: string }[]>(`SELECT who, token FROM ledger ORDER BY id`);
      assert.deepEqual(
        ledger.map((r) => [r.who.split(':')[0], Number(r.token)]),
        [['taker', token + 1]],
        'exactly one committer',
      );
      assert.deepEqual(
        (await db.logRows('fenced')).map((r) => r.status),
        ['EXPIRED', 'RELEASED'],
      );
    } finally {
      await blocker.end();
      await Promise.all([victimWorker.close(), takerWorker.close()]);
      if (!pg) await db.query(`DROP USER IF EXISTS '${user}'@'%'`);
    }
  });

  it('event loop blocked past the lease: another process takes over, the stale commit is rejected, the signal aborts', async () => {
    const [victimWorker, takerWorker] = (await LockWorker.startMany(2, { settings: db.settings, options: target.options({ janitor: false }) })) as [
      LockWorker,
      LockWorker,
    ];
    await db.query('DELETE FROM ledger');
    try {
      let onAcquired!: (data: { token: number }) => void;
      const acquired = new Promise<{ token: number }>((r) => (onAcquired = r));
      const victimRun = victimWorker.run<Record<string, unknown>>(
        scenarios,
        'victim',
        { key: 'blocked', leaseMs: 600, business: db.settings, busyLoopMs: 3000 },
        (event, data) => event === 'acquired' && onAcquired(data as { token: number }),
      );
      const { token } = await acquired;
      const taken = await takerWorker.run<{ token: number; committed: boolean }>(scenarios, 'taker', {
        key: 'blocked',
        timeoutMs: 15_000,
        business: db.settings,
      });
      assert.equal(taken.token, token + 1);
      assert.equal(taken.committed, true);
      await db.query(`INSERT INTO control (name) VALUES ('blocked')`);
      const result = await victimRun;
      assert.equal(result.fenceCommitted, false);
      assert.equal(result.aborted, true);
      assert.equal(result.releaseError, 'LockLostError');
      const ledger = await db.query<{ who: string; token: string }[]>(`SELECT who, token FROM ledger ORDER BY id`);
      assert.deepEqual(
        ledger.map((r) => [r.who.split(':')[0], Number(r.token)]),
        [['taker', token + 1]],
        'exactly one committer',
      );
      assert.deepEqual(
        (await db.logRows('blocked')).map((r) => r.status),
        ['EXPIRED', 'RELEASED'],
      );
    } finally {
      await Promise.all([victimWorker.close(), takerWorker.close()]);
    }
  });
});
