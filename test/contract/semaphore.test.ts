import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { eventually } from '../support/lock-app.js';
import { ownLogRow, TestDatabase } from '../support/test-database.js';
import { LockWorker } from '../support/worker-host.js';
import { INSIDE_TABLE, type CrowdArgs, type CrowdResult } from './scenarios/semaphore.js';
import { contractSuite } from '../support/contract-targets.js';

/**
 * Semaphores across processes (lease strategy): at most `limit` holders of a key at once, each
 * with its own fencing token; a dead holder's permit frees after its lease; a stalled holder's
 * fenced commit is refused after a takeover; a caller naming another limit gets a typed error.
 */
const SCENARIO = new URL('./scenarios/semaphore.js', import.meta.url).href;
const PROCESSES = 4;
const CALLERS = 3;
const ITERATIONS = 8; // 4 x 3 x 8 = 96 entries per run
const HOLD_MS = 15;
const LIMIT = 3;

contractSuite('semaphore', 'semaphore across processes (lease)', { postgres: true }, (target) => {
  let db: TestDatabase;
  let workers: LockWorker[] = [];

  before(async () => {
    db = await TestDatabase.forTarget(target);
    await db.query(`CREATE TABLE ${INSIDE_TABLE} (run INT PRIMARY KEY, n INT NOT NULL DEFAULT 0, peak INT NOT NULL DEFAULT 0)${db.sql.tableOptions}`);
    await db.query(`CREATE TABLE sem_writes (id ${db.sql.autoId}, k VARCHAR(64) NOT NULL, writer VARCHAR(16) NOT NULL, token BIGINT NOT NULL)`);
    workers = await LockWorker.startMany(PROCESSES, {
      settings: db.settings,
      appModule: SCENARIO,
      options: { leaseMs: 5_000, retryMinDelayMs: 5, retryMaxDelayMs: 25, janitor: false },
    });
  });
  after(async () => {
    for (const worker of workers) worker.signal('SIGCONT');
    await Promise.all(workers.map((w) => w.close()));
    await db?.drop();
  });

  async function crowd(run: number, key: string, limit: number): Promise<{ results: CrowdResult[]; peak: number; n: number }> {
    await db.query(`INSERT INTO ${INSIDE_TABLE} (run) VALUES (?)`, [run]);
    const args: CrowdArgs = { key, limit, run, callers: CALLERS, iterations: ITERATIONS, holdMs: HOLD_MS };
    const results = await Promise.all(workers.map((w) => w.run<CrowdResult>(SCENARIO, 'crowd', args)));
    const [row] = await db.query<{ n: number; peak: number }[]>(`SELECT n, peak FROM ${INSIDE_TABLE} WHERE run = ?`, [run]);
    return { results, peak: Number(row!.peak), n: Number(row!.n) };
  }

  it(`limit ${LIMIT}: never more than ${LIMIT} inside across ${PROCESSES} processes x ${CALLERS} callers; tokens 1..N, strictly increasing`, async (t) => {
    const key = 'crowd';
    const { results, peak, n } = await crowd(1, key, LIMIT);
    const sections = PROCESSES * CALLERS * ITERATIONS;
    assert.equal(n, 0, 'every entry was counted out');
    assert.ok(peak <= LIMIT, `${peak} callers were inside at once (limit ${LIMIT})`);
    assert.ok(peak >= 2, `the semaphore let at most ${peak} in at once: it must let several in, not act as a lock`);
    const tokens = results.flatMap((r) => r.tokens).sort((a, b) => a - b);
    assert.deepEqual(
      tokens,
      Array.from({ length: sections }, (_, i) => i + 1),
    );
    const rows = await db.logRows(key);
    assert.equal(rows.length, sections);
    assert.deepEqual(new Set(rows.map((r) => r.status)), new Set(['RELEASED']));
    assert.deepEqual(new Set(rows.map((r) => r.mode)), new Set(['permit']));
    // In grant (row id) order the tokens strictly increase: every grant bumps the key's counter under its row lock.
    for (let i = 1; i < rows.length; i++) assert.ok(Number(rows[i]!.fencing_token) > Number(rows[i - 1]!.fencing_token));
    // By the server clock, never more than LIMIT permit intervals overlap.
    const events = rows.flatMap((r) => [
      { at: (r.acquired_at as Date).getTime(), d: 1 },
      { at: (r.ended_at as Date).getTime(), d: -1 },
    ]);
    events.sort((a, b) => a.at - b.at || a.d - b.d);
    let live = 0;
    let most = 0;
    for (const e of events) most = Math.max(most, (live += e.d));
    assert.ok(most <= LIMIT, `${most} permit rows overlapped by the server clock`);
    t.diagnostic(`limit ${LIMIT}: ${sections} entries, peak inside ${peak}, most overlapping permit rows ${most}`);
  });

  it('negative control: the same workload under limit 6, and without the semaphore, has more than 3 inside at once', async (t) => {
    const wider = await crowd(2, 'crowd-wide', 6);
    const none = await crowd(3, 'unused', 0);
    assert.ok(wider.peak > LIMIT, `limit 6: peak ${wider.peak}: the detector saw no overlap beyond ${LIMIT}`);
    assert.ok(wider.peak <= 6, `limit 6: peak ${wider.peak}`);
    assert.ok(none.peak > LIMIT, `no semaphore: peak ${none.peak}`);
    t.diagnostic(`peak inside: limit 6 -> ${wider.peak}, no semaphore -> ${none.peak}`);
  });

  it('a different limit for a key in use is refused with SemaphoreLimitError, nothing written', async () => {
    const key = 'limits';
    const holder = workers[0]!;
    const held = new Promise<void>((resolve) => {
      void holder
        .run(SCENARIO, 'holdPermits', { key, limit: 3, count: 1, leaseMs: 5_000 }, (event) => event === 'held' && resolve())
        .catch(() => undefined);
    });
    await held;
    const before = await db.logRows(key);
    const [keyRow] = await db.query<{ fencing_token: string; semaphore_limit: number }[]>(
      'SELECT fencing_token, semaphore_limit FROM db_lock WHERE lock_key = ?',
      [Buffer.from(key)],
    );
    const refused = await workers[1]!.run<{ error?: string; currentLimit?: number }>(SCENARIO, 'askWithLimit', { key, limit: 4 });
    assert.deepEqual(refused, { error: 'SemaphoreLimitError', currentLimit: 3 });
    assert.deepEqual((await db.logRows(key)).map(ownLogRow), before.map(ownLogRow), 'no log row written');
    const [after] = await db.query<{ fencing_token: string; semaphore_limit: number }[]>(
      'SELECT fencing_token, semaphore_limit FROM db_lock WHERE lock_key = ?',
      [Buffer.from(key)],
    );
    assert.deepEqual(after, keyRow, 'key row untouched (token and limit)');
    // The same limit is served.
    assert.deepEqual(await workers[1]!.run(SCENARIO, 'askWithLimit', { key, limit: 3 }), {});
    // Give the holder process back (its permit ends with its app).
    await holder.close();
    workers[0] = await LockWorker.start({
      settings: db.settings,
      appModule: SCENARIO,
      options: { leaseMs: 5_000, retryMinDelayMs: 5, retryMaxDelayMs: 25, janitor: false },
    });
    // No permit live any more: a new limit is adopted.
    assert.deepEqual(await workers[1]!.run(SCENARIO, 'askWithLimit', { key, limit: 4 }), {});
  });

  it('a SIGKILLed holder frees its permits after its lease, not before', async () => {
    const key = 'killed';
    const LEASE = 1_500;
    const victim = await LockWorker.start({ settings: db.settings, appModule: SCENARIO, options: { leaseMs: LEASE, janitor: false } });
    try {
      await new Promise<void>((resolve) => {
        void victim
          .run(SCENARIO, 'holdPermits', { key, limit: 2, count: 2, leaseMs: LEASE }, (event) => event === 'held' && resolve())
          .catch(() => undefined);
      });
      await victim.kill();
      const taken = await workers[1]!.run<{ token: number; limit: number }>(SCENARIO, 'takePermit', { key, limit: 2, timeoutMs: 15_000 });
      assert.equal(taken.limit, 2);
      assert.equal(taken.token, 3);
      const rows = await db.query<Record<string, unknown>[]>(
        `SELECT g.status, g.note, g.acquired_at, g.fencing_token, ${db.sql.leaseEndsAt('g', 'p')} AS lease_end ` +
          'FROM db_lock_log g LEFT JOIN db_lock_process p ON p.id = g.process_id WHERE g.lock_key = ? ORDER BY g.id',
        [Buffer.from(key)],
      );
      const victims = rows.filter((r) => Number(r.fencing_token) <= 2);
      const taker = rows.find((r) => Number(r.fencing_token) === 3)!;
      assert.ok(
        victims.some((r) => r.status === 'EXPIRED' && String(r.note).startsWith('taken over by')),
        'a dead permit was taken over',
      );
      const leaseEnd = Math.min(...victims.map((r) => (r.lease_end as Date).getTime()));
      const grantedAt = (taker.acquired_at as Date).getTime();
      assert.ok(grantedAt >= leaseEnd, `granted ${leaseEnd - grantedAt} ms before the dead holder's lease ended`);
      // Margin: the taker polls with backoff (≤ 25 ms) plus a loaded 2-core machine's scheduling.
      assert.ok(grantedAt - leaseEnd < 2_000, `granted ${grantedAt - leaseEnd} ms after the lease ended (margin 2000 ms)`);
    } finally {
      await victim.kill().catch(() => undefined);
    }
  });

  it("a stalled (SIGSTOP) permit holder's fenced commit is refused after a takeover; the taker commits", async () => {
    const key = 'stalled';
    const holder = await LockWorker.start({
      settings: db.settings,
      appModule: SCENARIO,
      options: { leaseMs: 300, retryMinDelayMs: 5, retryMaxDelayMs: 25, janitor: false },
    });
    try {
      // The other permit of 2 is held for the whole test: the taker needs the stalled holder's.
      await new Promise<void>((resolve) => {
        void workers[2]!
          .run(SCENARIO, 'holdPermits', { key: `sem-fence:${key}`, limit: 2, count: 1, leaseMs: 20_000 }, (e) => e === 'held' && resolve())
          .catch(() => undefined);
      });
      let takerRun: Promise<{ outcome: string }> | undefined;
      let stopped = false;
      const holderRun = holder.run<{ outcome: string; message?: string }>(SCENARIO, 'writeOnce', { key, writer: 'A', stallMs: 400 }, (event) => {
        if (event !== 'wrote' || stopped) return;
        stopped = true;
        holder.signal('SIGSTOP');
        takerRun = workers[3]!.run(SCENARIO, 'writeOnce', { key, writer: 'B', stallMs: 0 }, (e) => e === 'granted' && holder.signal('SIGCONT'));
      });
      const outcome = await holderRun;
      await eventually(() => takerRun !== undefined, 10_000, 'the taker');
      assert.equal(outcome.outcome, 'lost', JSON.stringify(outcome));
      assert.equal((await takerRun!).outcome, 'committed');
      const writes = await db.query<{ writer: string }[]>('SELECT writer FROM sem_writes WHERE k = ?', [key]);
      assert.deepEqual(
        writes.map((w) => w.writer),
        ['B'],
        "only the taker's write exists",
      );
      const rows = await db.logRows(`sem-fence:${key}`);
      const a = rows.find((r) => r.status === 'EXPIRED');
      assert.ok(a && String(a.note).startsWith('taken over by'), 'the stalled permit was taken over');
    } finally {
      holder.signal('SIGCONT');
      await holder.close();
    }
  });
});
