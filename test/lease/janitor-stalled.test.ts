import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import { type JanitorReport, type LockService } from '../../lib/index.js';
import { TestDatabase } from '../support/test-database.js';
import { LockWorker } from '../support/worker-host.js';
import { createLockApp } from '../support/lock-app.js';
import { contractSuite } from '../support/contract-targets.js';
import { rawSession, type RawSession } from '../support/raw-session.js';

/**
 * The janitor's own lock held by a process stopped in the middle of a run: another process must
 * take the janitor role once that lease ran out, and the stopped janitor must not carry on when it
 * resumes. And what `runJanitor()` (a public admin call) rejects with when one of its statements
 * fails: README "Typed errors. Callers see only DbLockError subclasses, with the driver's error as
 * `cause`".
 *
 * A janitor run is made to stop mid-way by a row lock the test holds on a reclaim candidate (an
 * expired live row of a dead process): the reclaim's UPDATE waits on it (the lock sessions wait
 * 1 s per try, tries go on for 3 s). PostgreSQL's reclaim skips a locked candidate (SKIP LOCKED),
 * but the same statement also counts the ended row on its process's lease row (ended_count): there
 * the test holds the dead process's row instead, and the reclaim waits on that.
 */
const SCENARIOS = new URL('./stall-scenarios.js', import.meta.url).href;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const LEASE_MS = 1_000;

contractSuite('lease-janitor', 'the janitor lock held by a stopped process', { postgres: true }, (target) => {
  let db: TestDatabase;
  let admin: { app: INestApplicationContext; locks: LockService };

  before(async () => {
    db = await TestDatabase.forTarget(target);
    // The timer is effectively off: the runs are started by the test.
    admin = await createLockApp(db.settings, target.options({ leaseMs: LEASE_MS, janitor: { intervalMs: 3_600_000 } }));
  });
  after(async () => {
    await admin?.app.close();
    await db?.drop();
  });

  /**
   * A live row of a dead process whose lease ran out a minute ago: the janitor's reclaim candidate.
   * The row the test locks to stop the reclaim is returned: the log row (MySQL), its process row (PostgreSQL).
   */
  async function deadHolder(key: string): Promise<string> {
    const { ago, uuid } = db.sql;
    await db.query(`INSERT INTO db_lock (lock_key, fencing_token, last_granted_at) VALUES (?, 1, ${ago(120_000)})`, [Buffer.from(key)]);
    let processId: string | null = null;
    if (db.type === 'postgres') {
      await db.query(`INSERT INTO db_lock_process (holder, started_at, renewed_at) VALUES ('dead:1', ${ago(180_000)}, ${ago(120_000)})`);
      const [dead] = await db.query<{ id: string }[]>(`SELECT MAX(id) AS id FROM db_lock_process WHERE holder = 'dead:1'`);
      processId = String(dead!.id);
    }
    await db.query(
      `INSERT INTO db_lock_log (lock_key, mode, owner, holder, fencing_token, status, lease_ms, acquired_at, expires_at, process_id) ` +
        `VALUES (?, 'write', ${uuid}, 'dead:1', 1, 'ACQUIRED', 30000, ${ago(120_000)}, ${ago(60_000)}, ?)`,
      [Buffer.from(key), processId],
    );
    if (processId !== null) return processId;
    const [row] = await db.query<{ id: number }[]>(`SELECT id FROM db_lock_log WHERE lock_key = ?`, [Buffer.from(key)]);
    return String(row!.id);
  }

  /** Until a session of this database runs the janitor's reclaim UPDATE (waiting on the test's row lock). */
  async function reclaimWaiting(): Promise<void> {
    const deadline = performance.now() + 5_000;
    while (performance.now() < deadline) {
      const [row] = await db.query<{ n: number }[]>(
        db.type === 'postgres'
          ? `SELECT COUNT(*) AS n FROM pg_stat_activity WHERE datname = ? AND wait_event_type = 'Lock' AND query LIKE '%reclaimed by janitor%' AND pid <> pg_backend_pid()`
          : `SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST WHERE DB = ? AND COMMAND = 'Query' AND INFO LIKE '%reclaimed by janitor%' AND ID <> CONNECTION_ID()`,
        [db.settings.database],
      );
      if (Number(row!.n) > 0) return;
      await sleep(10);
    }
    throw new Error('the janitor reclaim never waited on the row lock');
  }

  it('a janitor stopped 17 s mid-run: another process runs the janitor after its lease; resumed, it stops and reports typed', async () => {
    const id = await deadHolder('jl:stall');
    const worker = await LockWorker.start({
      settings: db.settings,
      options: target.options({ leaseMs: LEASE_MS, janitor: { intervalMs: 3_600_000 } }),
    });
    const session: RawSession = await rawSession(db.settings);
    try {
      if (db.type !== 'postgres') await session.query('SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED');
      await session.begin();
      await session.query(`SELECT id FROM ${db.type === 'postgres' ? 'db_lock_process' : 'db_lock_log'} WHERE id = ? FOR UPDATE`, [id]);
      const stalled = worker.run<JanitorReport | { error: string; typed: boolean }>(SCENARIOS, 'janitorOnce');
      await reclaimWaiting();
      worker.signal('SIGSTOP');
      const stoppedAt = performance.now();
      await session.rollback(); // the stopped janitor's statement goes on in the server
      // Another process takes the janitor role once the stopped one's janitor lease ran out.
      let report: JanitorReport | undefined;
      while (performance.now() - stoppedAt < LEASE_MS + 4_000) {
        report = await admin.locks.runJanitor();
        if (report.ran) break;
        await sleep(100);
      }
      const tookOverAfter = Math.round(performance.now() - stoppedAt);
      assert.equal(report?.ran, true, `no other janitor ran in ${tookOverAfter} ms (lease ${LEASE_MS} ms)`);
      const janitorRows = await db.query<{ status: string; note: string | null; process_id: string }[]>(
        `SELECT status, note, process_id FROM db_lock_log WHERE lock_key = ? OR lock_key LIKE ? ORDER BY id`,
        [Buffer.from('ff6a616e69746f72', 'hex'), Buffer.from('ff25', 'hex')],
      );
      await sleep(Math.max(0, 17_000 - (performance.now() - stoppedAt)));
      worker.signal('SIGCONT');
      const resumed = await stalled;
      assert.ok(
        !('error' in resumed) || resumed.typed,
        `the resumed janitor's run ended with ${JSON.stringify(resumed)}; janitor lock rows: ${JSON.stringify(janitorRows)}`,
      );
      if (!('error' in resumed))
        assert.equal(resumed.complete, false, `the resumed janitor went on after losing its lock: ${JSON.stringify(resumed)}`);
    } finally {
      worker.signal('SIGCONT');
      await session.rollback().catch(() => undefined);
      await session.end().catch(() => undefined);
      await worker.kill();
    }
  });
});
