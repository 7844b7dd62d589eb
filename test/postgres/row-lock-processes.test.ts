import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { eventually } from '../support/lock-app.js';
import { PgTestDatabase, pgTestsRun } from '../support/pg-test-database.js';

const CHILD = fileURLToPath(new URL('./pg-worker.child.js', import.meta.url));
const PROCESSES = 3;
const CALLERS = 3;
const ITERATIONS = 25;

/**
 * The row-lock strategy on PostgreSQL across OS processes: exclusion with a negative control, a
 * SIGKILLed holder's key free at once (the server rolls back the closed session), and a SIGSTOPped
 * holder that keeps its key (no lease to run out) and commits after SIGCONT while a waiter waits.
 */
describe('row-lock on PostgreSQL, several processes', { skip: (await pgTestsRun()) ? false : 'no PostgreSQL server' }, () => {
  let db: PgTestDatabase;
  let url: string;
  before(async () => {
    db = await PgTestDatabase.create('dblock_pg_procs');
    const dataSource = await db.dataSource();
    await dataSource.runMigrations();
    await dataSource.query('CREATE TABLE counter (id int PRIMARY KEY, value int NOT NULL)');
    url = db.url;
  });
  after(async () => {
    await db.drop();
  });

  const start = (...args: string[]) => {
    const child = spawn(process.execPath, [CHILD, ...args], {
      env: { ...process.env, DB_LOCK_PG_CHILD_URL: url },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout!.on('data', (chunk) => (out += String(chunk)));
    return {
      child,
      output: () => out,
      line: (text: string, timeoutMs = 20_000) => eventually(() => out.includes(text), timeoutMs, `'${text}' from the child`),
      exited: new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code))),
    };
  };
  const counter = async (id: number) => Number((await db.query<{ value: number }>('SELECT value FROM counter WHERE id = $1', [id]))[0]!.value);

  async function countUp(id: number, locked: boolean): Promise<{ final: number; tokens: number[] }> {
    await db.query('INSERT INTO counter VALUES ($1, 0)', [id]);
    const runs = Array.from({ length: PROCESSES }, () =>
      start('count', 'counter', String(CALLERS), String(ITERATIONS), locked ? '1' : '0', String(id)),
    );
    const codes = await Promise.all(runs.map((r) => r.exited));
    assert.deepEqual(codes, Array(PROCESSES).fill(0));
    const tokens = runs.flatMap((r) => (JSON.parse(r.output().trim().split('\n').pop()!) as { tokens: number[] }).tokens);
    return { final: await counter(id), tokens };
  }

  it('excludes across processes: the counter is exact, every hold has its own token, one audit row each', async () => {
    const sections = PROCESSES * CALLERS * ITERATIONS;
    const { final, tokens } = await countUp(10, true);
    assert.equal(final, sections);
    assert.equal(new Set(tokens).size, sections, 'a token handed out twice');
    const audit = await db.query<{ n: number; tokens: number }>(
      "SELECT count(*)::int AS n, count(DISTINCT fencing_token)::int AS tokens FROM db_lock_log WHERE lock_key = 'counter'::bytea AND status = 'RELEASED'",
    );
    assert.deepEqual(audit[0], { n: sections, tokens: sections });
  });

  it('negative control: the same workload without the lock loses updates', async () => {
    const { final } = await countUp(11, false);
    assert.ok(final < PROCESSES * CALLERS * ITERATIONS, `no update lost without the lock (${final}): the test could not see a violation`);
  });

  it("a SIGKILLed holder's key is free at once, its work rolled back", async () => {
    await db.query('INSERT INTO counter VALUES (2, 0) ON CONFLICT (id) DO UPDATE SET value = 0');
    const holder = start('hold', 'killed', '60000');
    await holder.line('HELD');
    holder.child.kill('SIGKILL');
    await holder.exited;
    const waiter = start('hold', 'killed', '0');
    const startedAt = performance.now();
    await waiter.line('DONE', 10_000);
    assert.equal(await waiter.exited, 0);
    // The server notices the closed socket at once; a generous bound for the child's start-up (typically 1-2 s on 2 cores).
    assert.ok(performance.now() - startedAt < 8_000);
    assert.equal(await counter(2), 1, "the killed holder's write was rolled back, the waiter's committed");
  });

  it('a SIGSTOPped holder keeps its key: the waiter waits, the holder commits after SIGCONT, then the waiter', async () => {
    await db.query('INSERT INTO counter VALUES (2, 0) ON CONFLICT (id) DO UPDATE SET value = 0');
    const holder = start('hold', 'stalled', '300');
    await holder.line('HELD');
    holder.child.kill('SIGSTOP');
    const waiter = start('hold', 'stalled', '0');
    await sleep(2_500);
    assert.ok(!waiter.output().includes('HELD'), 'the waiter got in while the holder was stopped');
    holder.child.kill('SIGCONT');
    await holder.line('DONE');
    await waiter.line('DONE');
    assert.deepEqual(await Promise.all([holder.exited, waiter.exited]), [0, 0]);
    assert.equal(await counter(2), 2, 'both holds committed their work');
    const order = await db.query<{ fencing_token: string }>("SELECT fencing_token FROM db_lock_log WHERE lock_key = 'stalled'::bytea ORDER BY id");
    assert.deepEqual(
      order.map((r) => Number(r.fencing_token)),
      [1, 2],
    );
  });
});
