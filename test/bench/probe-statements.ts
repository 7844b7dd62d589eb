/**
 * Development probe: the cost of the lease protocol's statements against floors measured in the
 * same run, interleaved round by round (the machine is noisy).
 */
import 'reflect-metadata';
import { randomUUID } from 'node:crypto';
import mysql from 'mysql2/promise';
import { resolveTargets } from '../../lib/core/lock-key.js';
import { leanGrantPlan } from '../../lib/store/mysql/grant.sql.js';
import { endRowsPlan } from '../../lib/store/mysql/hold.sql.js';
import { TestDatabase } from '../support/test-database.js';
import { runProbe } from './probe-main.js';

async function main(): Promise<void> {
  const db = await TestDatabase.create('dblock_stmt');
  const c = await mysql.createConnection({ ...db.settings, multipleStatements: true });
  await c.query('SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED');
  await c.query('CREATE TABLE pk (id INT PRIMARY KEY, v INT) ENGINE=InnoDB; INSERT INTO pk VALUES (1,0),(2,0)');
  await c.query("INSERT INTO db_lock (lock_key, fencing_token) VALUES ('k', 0)");
  await c.query("INSERT INTO db_lock_process (holder, started_at, renewed_at) VALUES ('p', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))");
  const targets = resolveTargets('k', 'write', '');
  const grant = () =>
    leanGrantPlan({
      acquisitionId: randomUUID(),
      holder: 'h:1',
      processId: '1',
      strategy: 'lease',
      targets,
      leaseMs: 30_000,
      waitedMs: 0,
      writerWaitMarkMs: 0,
      writerPreference: true,
    });
  let lastIds: string[] = [];
  const releaseTimes: number[] = [];
  const shapes: Record<string, () => Promise<unknown>> = {
    'select 1': () => c.query('SELECT 1'),
    'pk update': () => c.query('UPDATE pk SET v = v + 1 WHERE id = 1'),
    'two pk updates': async () => {
      await c.query('UPDATE pk SET v = v + 1 WHERE id = 1');
      await c.query('UPDATE pk SET v = v + 1 WHERE id = 2');
    },
    'minimal grant shape': () =>
      c.query(
        `START TRANSACTION; INSERT INTO db_lock_log (lock_key, mode, owner, holder, fencing_token, status, lease_ms, acquired_at, expires_at) VALUES ('z', 'write', '${randomUUID()}', 'h', 1, 'RELEASED', 1, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6)); UPDATE pk SET v = v + 1 WHERE id = 2; COMMIT`,
      ),
    'lean grant only': async () => {
      const plan = grant();
      const [results] = (await c.query(plan.statements.join(';\n'))) as unknown as [unknown[]];
      const outcome = plan.parse(results);
      if (!outcome.granted) throw new Error(`not granted: ${JSON.stringify(outcome)}`);
      await c.query(`UPDATE db_lock_log SET status = 'RELEASED' WHERE id = ${outcome.rows[0]!.id}`);
    },
    'release only (+grant)': async () => {
      const plan = grant();
      const [results] = (await c.query(plan.statements.join(';\n'))) as unknown as [unknown[]];
      const outcome = plan.parse(results);
      const t = performance.now();
      await c.query(endRowsPlan(outcome.granted ? outcome.rows.map((r) => r.id) : [], 'RELEASED').statements[0]!);
      releaseTimes.push(performance.now() - t);
    },
    'lean grant + release': async () => {
      const plan = grant();
      const [results] = (await c.query(plan.statements.join(';\n'))) as unknown as [unknown[]];
      const outcome = plan.parse(results);
      if (!outcome.granted) throw new Error(`not granted: ${JSON.stringify(outcome)}`);
      lastIds = outcome.rows.map((r) => r.id);
      await c.query(endRowsPlan(lastIds, 'RELEASED').statements[0]!);
    },
  };
  const rounds = 5;
  const ops = Number(process.argv[2] ?? 200);
  const results: Record<string, number[]> = {};
  for (let r = 0; r < rounds; r++)
    for (const [name, fn] of Object.entries(shapes)) {
      const t0 = performance.now();
      for (let i = 0; i < ops; i++) await fn();
      (results[name] ??= []).push((performance.now() - t0) / ops);
    }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const floor = median(results['two pk updates']!);
  console.log(`release statement alone: ${median(releaseTimes).toFixed(3)} ms`);
  for (const [name, xs] of Object.entries(results))
    console.log(`${name.padEnd(22)} ${median(xs).toFixed(3)} ms  ${(median(xs) / floor).toFixed(2)}x two PK updates`);
  await c.end();
  await db.drop();
}

runProbe(main);
