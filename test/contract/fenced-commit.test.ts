import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { eventually } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';
import { LockWorker } from '../support/worker-host.js';
import { type ContractTarget, contractSuite } from '../support/contract-targets.js';

/**
 * The fenced commit, across processes: a holder stalled (SIGSTOP) between its business writes and
 * its commit, past its lease, while another process takes the key over and commits, must roll back
 * with LockLostError, and none of its writes may exist. Control: a holder stalled past its lease
 * that nobody took over commits normally.
 *
 * Lease holders only: a row-lock holder has no lease and is never stale while its transaction is
 * open, so a stalled one keeps its key and commits (test/row-lock/stall.test.ts, and
 * test/contract/mixed-strategies.test.ts for a lease taker waiting behind it).
 */
const SCENARIO = new URL('./scenarios/fenced-commit.js', import.meta.url).href;
/** Holder processes (one stalled holder per process at a time; keys run in parallel). */
const HOLDERS = 4;
const ROUNDS: Record<string, number> = { lease: 26 };
/** Busy stall after the writes: the window in which the parent SIGSTOPs the holder. */
const STALL_MS = 250;
const LEASE_MS = 250;

type Outcome = { outcome: 'committed'; token: number } | { outcome: 'lost'; byDatabaseFence: boolean; message: string };

const suite = (target: ContractTarget): void => {
  const { strategy } = target;
  const ROUNDS_PER_HOLDER = ROUNDS[strategy]!;
  let db: TestDatabase;
  let holders: LockWorker[];
  let taker: LockWorker;

  before(async () => {
    db = await TestDatabase.forTarget(target);
    await db.query(
      `CREATE TABLE fence_writes (id ${db.sql.autoId}, k VARCHAR(64) NOT NULL, round INT NOT NULL, writer VARCHAR(16) NOT NULL, token BIGINT NOT NULL)`,
    );
    await db.query('CREATE TABLE fence_counters (k VARCHAR(64) PRIMARY KEY, n INT NOT NULL DEFAULT 0, last_writer VARCHAR(16))');
    const config = {
      settings: db.settings,
      appModule: SCENARIO,
      // No janitor: it would end a stalled holder's expired row itself, and the control needs nobody but the takers to take a key over.
      options: { leaseMs: LEASE_MS, retryMinDelayMs: 5, retryMaxDelayMs: 25, janitor: false as const },
    };
    [holders, taker] = await Promise.all([
      LockWorker.startMany(HOLDERS, { ...config, options: { ...config.options, strategy } }),
      LockWorker.start({ ...config, options: { ...config.options, strategy: 'lease' } }),
    ]);
  });
  after(async () => {
    for (const worker of [...(holders ?? []), taker]) worker?.signal('SIGCONT');
    await Promise.all([...(holders ?? []), taker].map((w) => w?.close()));
    await db?.drop();
  });

  /** One round on `key`: holder writes and stalls, is stopped, the taker takes over, holder resumes. */
  async function stalledRound(holder: LockWorker, key: string, round: number): Promise<{ holder: Outcome; taker: Outcome }> {
    let takerRun: Promise<Outcome> | undefined;
    let stopped = false;
    const holderRun = holder.run<Outcome>(SCENARIO, 'writeOnce', { key, round, writer: 'A', stallMs: STALL_MS }, (event) => {
      if (event !== 'wrote' || stopped) return;
      stopped = true;
      holder.signal('SIGSTOP');
      takerRun = taker.run<Outcome>(SCENARIO, 'writeOnce', { key, round, writer: 'B', stallMs: 0 }, (takerEvent) => {
        // Granted to the taker: the stalled holder's lease has run out and was taken over.
        if (takerEvent === 'granted') holder.signal('SIGCONT');
      });
    });
    try {
      const holderOutcome = await holderRun;
      assert.ok(takerRun, `round ${round} on ${key}: the holder never reported its write`);
      return { holder: holderOutcome, taker: await takerRun };
    } finally {
      holder.signal('SIGCONT');
    }
  }

  it(`${HOLDERS * ROUNDS_PER_HOLDER} takeovers of stalled holders: 0 stale commits`, async () => {
    const keys = holders.map((_, i) => `k${i}`);
    for (const key of keys) await db.query('INSERT INTO fence_counters (k) VALUES (?)', [key]);
    const outcomes: { key: string; round: number; holder: Outcome; taker: Outcome }[] = [];
    await Promise.all(
      holders.map(async (holder, i) => {
        for (let round = 0; round < ROUNDS_PER_HOLDER; round++) {
          outcomes.push({ key: keys[i]!, round, ...(await stalledRound(holder, keys[i]!, round)) });
        }
      }),
    );
    const total = HOLDERS * ROUNDS_PER_HOLDER;
    const lost = outcomes.filter((o) => o.holder.outcome === 'lost');
    const byFence = lost.filter((o) => o.holder.outcome === 'lost' && o.holder.byDatabaseFence).length;
    const staleWrites = await db.query<{ n: string }[]>(`SELECT COUNT(*) AS n FROM fence_writes WHERE writer = 'A'`);
    const takerWrites = await db.query<{ n: string }[]>(`SELECT COUNT(*) AS n FROM fence_writes WHERE writer = 'B'`);
    const counters = await db.query<{ k: string; n: number; last_writer: string }[]>('SELECT k, n, last_writer FROM fence_counters ORDER BY k');
    const report = `stale commits ${staleWrites[0]!.n}/${total}; holders rolled back ${lost.length}/${total} (${byFence} by the database fence, ${lost.length - byFence} by the watchdog first)`;
    process.stdout.write(`# ${report}\n`);

    assert.equal(Number(staleWrites[0]!.n), 0, report);
    assert.equal(lost.length, total, report);
    assert.ok(
      outcomes.every((o) => o.taker.outcome === 'committed'),
      `every taker committed: ${JSON.stringify(outcomes.filter((o) => o.taker.outcome !== 'committed'))}`,
    );
    assert.equal(Number(takerWrites[0]!.n), total);
    for (const counter of counters) {
      assert.equal(counter.n, ROUNDS_PER_HOLDER, `${counter.k}: only the takers' increments exist`);
      assert.equal(counter.last_writer, 'B');
    }
    // Fencing tokens and audit, per key in grant order: every stalled holder's row EXPIRED (taken
    // over), then its taker's row RELEASED with the token the taker committed with, newer than the
    // holder's. Tokens only ever increase; they need not be consecutive: with a 250 ms lease on a
    // loaded machine a grant may answer after its lease ran out, and is then given back (a
    // RELEASED row of its own) and asked for again under a new token; a grant whose answer was lost
    // is given back the same way ('abandoned').
    const rows = await db.query<{ k: string; token: string; status: string; note: string | null }[]>(
      `SELECT ${db.sql.keyText('lock_key')} AS k, fencing_token AS token, status, note FROM db_lock_log ORDER BY id`,
    );
    for (const key of keys) {
      const ofKey = rows.filter((r) => r.k === `fence:${key}`);
      const tokens = ofKey.map((r) => Number(r.token));
      assert.ok(
        tokens.every((t, i) => i === 0 || t > tokens[i - 1]!),
        `${key}: tokens increase in grant order: ${JSON.stringify(ofKey)}`,
      );
      const takerTokens = outcomes.filter((o) => o.key === key && o.taker.outcome === 'committed').map((o) => (o.taker as { token: number }).token);
      const stepOf = (r: (typeof ofKey)[number]) =>
        r.status === 'EXPIRED' ? 'holder' : r.status === 'RELEASED' && takerTokens.includes(Number(r.token)) ? 'taker' : undefined;
      const sequence = ofKey.map(stepOf).filter((step) => step !== undefined);
      assert.deepEqual(
        sequence,
        Array.from({ length: 2 * ROUNDS_PER_HOLDER }, (_, i) => (i % 2 === 0 ? 'holder' : 'taker')),
        JSON.stringify(ofKey),
      );
      const others = ofKey.filter((r) => stepOf(r) === undefined);
      assert.ok(
        others.every((r) => r.status === 'RELEASED' && (r.note?.startsWith('given back') || r.note?.startsWith('abandoned'))),
        `${key}: every other row is a grant given back: ${JSON.stringify(others)}`,
      );
    }
  });

  it('a holder stalled past its lease that nobody took over is refused by its own local deadline: nothing written, its row EXPIRED', async () => {
    const holder = holders[0]!;
    for (let round = 0; round < 5; round++) {
      const key = `control${round}`;
      await db.query('INSERT INTO fence_counters (k) VALUES (?)', [key]);
      let stopped = false;
      const run = holder.run<Outcome>(SCENARIO, 'writeOnce', { key, round, writer: 'A', stallMs: STALL_MS, control: true }, (event) => {
        if (event !== 'wrote' || stopped) return;
        stopped = true;
        holder.signal('SIGSTOP');
      });
      try {
        await eventually(() => stopped, 10_000, 'the write');
        // Past the lease by the server clock: no fixed sleep, the database says so.
        await eventually(
          async () =>
            (
              await db.query<unknown[]>(
                `SELECT 1 FROM db_lock_log g LEFT JOIN db_lock_process p ON p.id = g.process_id WHERE g.lock_key = ? ` +
                  `AND ${db.sql.leaseEndsAt('g', 'p')} < ${db.sql.ago(100)}`,
                [Buffer.from(`fence:${key}`)],
              )
            ).length === 1,
          5000,
          'the lease to run out',
        );
      } finally {
        holder.signal('SIGCONT');
      }
      const outcome = await run;
      // Its signal says lost past the local deadline, so its commit must not go through either.
      assert.equal(outcome.outcome, 'lost', JSON.stringify(outcome));
      const writes = await db.query<{ writer: string }[]>('SELECT writer FROM fence_writes WHERE k = ?', [key]);
      assert.deepEqual(writes, []);
      assert.deepEqual(
        (await db.logRows(`fence:${key}`)).map((r) => r.status),
        ['EXPIRED'],
      );
    }
  });
};
contractSuite('fenced-commit', 'fenced commit across processes (SIGSTOP past the lease; lease holders)', { postgres: true }, suite);
