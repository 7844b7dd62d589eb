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

/** The lease of the lease strategy's children: short, so that takeovers come soon. */
const LEASE_MS = 1_500;

/**
 * Both strategies on PostgreSQL across OS processes: exclusion with a negative control; for
 * row-lock, a SIGKILLed holder's key free at once (the server rolls back the closed session) and a
 * SIGSTOPped holder that keeps its key (no lease to run out) and commits after SIGCONT while a
 * waiter waits; for the lease, a SIGKILLed holder's key taken over once its lease ran out, and a
 * SIGSTOPped holder's fenced commit refused after the takeover.
 */
describe('PostgreSQL, several processes', { skip: (await pgTestsRun()) ? false : 'no PostgreSQL server' }, () => {
  let db: PgTestDatabase;
  let url: string;
  before(async () => {
    db = await PgTestDatabase.create('dblock_pg_procs');
    const dataSource = await db.dataSource();
    await dataSource.runMigrations();
    await dataSource.query('CREATE TABLE counter (id int PRIMARY KEY, value int NOT NULL)');
    url = db.url;
  });
  /** Every child started, killed at the end whatever a failed test left behind (a stopped one would keep the run waiting). */
  const children = new Set<ReturnType<typeof spawn>>();
  after(async () => {
    for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
    await db.drop();
  });

  const startAs = (strategy: 'lease' | 'row-lock', ...args: string[]) => {
    const child = spawn(process.execPath, [CHILD, ...args], {
      env: { ...process.env, DB_LOCK_PG_CHILD_URL: url, DB_LOCK_PG_CHILD_STRATEGY: strategy, DB_LOCK_PG_CHILD_LEASE_MS: String(LEASE_MS) },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    children.add(child);
    let out = '';
    child.stdout!.on('data', (chunk) => (out += String(chunk)));
    return {
      child,
      output: () => out,
      line: (text: string, timeoutMs = 20_000) => eventually(() => out.includes(text), timeoutMs, `'${text}' from the child`),
      exited: new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code))),
    };
  };
  const start = (...args: string[]) => startAs('row-lock', ...args);
  const counter = async (id: number) => Number((await db.query<{ value: number }>('SELECT value FROM counter WHERE id = $1', [id]))[0]!.value);

  async function countUp(id: number, locked: boolean, strategy: 'lease' | 'row-lock' = 'row-lock'): Promise<{ final: number; tokens: number[] }> {
    await db.query('INSERT INTO counter VALUES ($1, 0)', [id]);
    const runs = Array.from({ length: PROCESSES }, () =>
      startAs(strategy, 'count', `counter-${strategy}`, String(CALLERS), String(ITERATIONS), locked ? '1' : '0', String(id)),
    );
    const codes = await Promise.all(runs.map((r) => r.exited));
    assert.deepEqual(codes, Array(PROCESSES).fill(0));
    const tokens = runs.flatMap((r) => (JSON.parse(r.output().trim().split('\n').pop()!) as { tokens: number[] }).tokens);
    return { final: await counter(id), tokens };
  }

  for (const [strategy, id] of [
    ['row-lock', 10],
    ['lease', 12],
  ] as const) {
    it(`${strategy}: excludes across processes: the counter is exact, every hold has its own token, one log row each`, async () => {
      const sections = PROCESSES * CALLERS * ITERATIONS;
      const { final, tokens } = await countUp(id, true, strategy);
      assert.equal(final, sections);
      assert.equal(new Set(tokens).size, sections, 'a token handed out twice');
      const audit = await db.query<{ n: number; tokens: number }>(
        "SELECT count(*)::int AS n, count(DISTINCT fencing_token)::int AS tokens FROM db_lock_log WHERE lock_key = $1::text::bytea AND status = 'RELEASED' AND strategy = $2",
        [`counter-${strategy}`, strategy],
      );
      assert.deepEqual(audit[0], { n: sections, tokens: sections });
    });
  }

  it('negative control: the same workload without the lock loses updates', async () => {
    const { final } = await countUp(11, false);
    assert.ok(final < PROCESSES * CALLERS * ITERATIONS, `no update lost without the lock (${final}): the test could not see a violation`);
  });

  it("row-lock: a SIGKILLed holder's key is free at once, its work rolled back", async () => {
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

  it('row-lock: a SIGSTOPped holder keeps its key: the waiter waits, the holder commits after SIGCONT, then the waiter', async () => {
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

  it("lease: a SIGKILLed holder's key is taken over once its lease ran out, its work rolled back", async () => {
    await db.query('INSERT INTO counter VALUES (2, 0) ON CONFLICT (id) DO UPDATE SET value = 0');
    const holder = startAs('lease', 'hold', 'lease-killed', '60000');
    await holder.line('HELD');
    holder.child.kill('SIGKILL');
    const killedAt = performance.now();
    await holder.exited;
    const waiter = startAs('lease', 'hold', 'lease-killed', '0');
    await waiter.line('DONE', 15_000);
    assert.equal(await waiter.exited, 0);
    // Not before the lease ran out (its last renewal came before the kill: a margin of one renewal
    // interval, a third of the lease); after it by the child's start-up and retries (generous on 2 cores).
    const waited = performance.now() - killedAt;
    assert.ok(waited >= LEASE_MS / 2 && waited < LEASE_MS + 10_000, `taken over after ${waited.toFixed(0)} ms`);
    assert.equal(await counter(2), 1, "the killed holder's write was rolled back, the waiter's committed");
    const rows = await db.query<{ status: string; note: string | null }>(
      "SELECT status, note FROM db_lock_log WHERE lock_key = 'lease-killed'::bytea ORDER BY id",
    );
    assert.equal(rows[0]!.status, 'EXPIRED');
    assert.match(rows[0]!.note ?? '', /taken over by|reclaimed by janitor/);
    assert.equal(rows[1]!.status, 'RELEASED');
  });

  it('lease: a SIGSTOPped holder loses its key after its lease, and its fenced commit is refused after SIGCONT', async () => {
    await db.query('INSERT INTO counter VALUES (2, 0) ON CONFLICT (id) DO UPDATE SET value = 0');
    const holder = startAs('lease', 'hold', 'lease-stalled', '300', 'late');
    await holder.line('HELD');
    holder.child.kill('SIGSTOP');
    const waiter = startAs('lease', 'hold', 'lease-stalled', '0');
    await waiter.line('DONE', 15_000);
    holder.child.kill('SIGCONT');
    await holder.line('FAILED');
    assert.match(holder.output(), /FAILED LockLostError/);
    assert.deepEqual(await Promise.all([holder.exited, waiter.exited]), [0, 0]);
    assert.equal(await counter(2), 1, "only the waiter's work committed: the stalled holder's was rolled back");
    const rows = await db.query<{ status: string; fencing_token: string }>(
      "SELECT status, fencing_token FROM db_lock_log WHERE lock_key = 'lease-stalled'::bytea ORDER BY id",
    );
    assert.deepEqual(
      rows.map((r) => [r.status, Number(r.fencing_token)]),
      [
        ['EXPIRED', 1],
        ['RELEASED', 2],
      ],
    );
  });
});
