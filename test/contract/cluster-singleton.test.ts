import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { TestDatabase } from '../support/test-database.js';
import { LockWorker } from '../support/worker-host.js';
import { contractSuite } from '../support/contract-targets.js';

/** onLocked: 'skip' as a cluster singleton: three nodes fire the same job, exactly one runs it. */
const SCENARIO = new URL('./scenarios/cluster-singleton.js', import.meta.url).href;
const NODES = 3;
const ROUNDS = 10;

contractSuite('cluster-singleton', "onLocked 'skip' across processes", { postgres: true }, (target) => {
  let db: TestDatabase;
  let nodes: LockWorker[];

  before(async () => {
    db = await TestDatabase.forTarget(target);
    await db.query(`CREATE TABLE job_runs (id ${db.sql.autoId}, round INT NOT NULL, pid INT NOT NULL)${db.sql.tableOptions}`);
    await db.query(
      `CREATE TABLE job_attempts (id ${db.sql.autoId}, round INT NOT NULL, pid INT NOT NULL, outcome VARCHAR(8) NOT NULL)${db.sql.tableOptions}`,
    );
    nodes = await LockWorker.startMany(NODES, { settings: db.settings, appModule: SCENARIO, options: target.options({ leaseMs: 2000 }) });
  });
  after(async () => {
    await Promise.all((nodes ?? []).map((w) => w.close()));
    await db?.drop();
  });

  it(`${NODES} nodes fire the same job ${ROUNDS} times: exactly one runs each time`, async () => {
    let last: { outcome: string; skipped: number }[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      last = await Promise.all(nodes.map((node) => node.run<{ outcome: string; skipped: number }>(SCENARIO, 'fireJob', { round })));
      assert.deepEqual(last.map((r) => r.outcome).sort(), ['ran', 'skipped', 'skipped'], `round ${round}`);
    }
    const runs = await db.query<{ round: number; n: string }[]>('SELECT round, COUNT(*) AS n FROM job_runs GROUP BY round ORDER BY round');
    assert.deepEqual(
      runs.map((r) => [r.round, Number(r.n)]),
      Array.from({ length: ROUNDS }, (_, i) => [i, 1]),
      'one committed run per round',
    );
    assert.equal(
      last.reduce((sum, r) => sum + r.skipped, 0),
      (NODES - 1) * ROUNDS,
      'stats().skipped counts every skip',
    );
    const statuses = await db.query<{ status: string; n: string }[]>('SELECT status, COUNT(*) AS n FROM db_lock_log GROUP BY status');
    assert.deepEqual(
      statuses.map((s) => [s.status, Number(s.n)]),
      [['RELEASED', ROUNDS]],
      'a skip writes no log row',
    );
  });
});
