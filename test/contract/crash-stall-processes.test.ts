import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { TestDatabase } from '../support/test-database.js';
import { LockWorker } from '../support/worker-host.js';
import { type ContractTarget, contractSuite } from '../support/contract-targets.js';
import type { DbLockModuleOptions } from '../../lib/index.js';

/**
 * Crash and stall semantics with several processes that the other suites do not drive: a
 * SIGKILLed multi-key or write holder's keys come back after its lease and never before; a plain
 * lock's signal reads aborted as soon as its stopped process resumes past the lease; a stopped
 * row-lock multi-key holder keeps both keys and commits first; a dead row-lock multi-key holder
 * frees its keys at once; a semaphore permit of a dead process is taken over while a live
 * process's permit is left alone. Margins: grants within lease + 2 s (a loaded 2-core machine).
 */
const SCENARIO = new URL('./scenarios/crash-stall.js', import.meta.url).href;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const LEASE_MS = 1_000;
const MARGIN_MS = 2_000;
type Bump = { tokens: number[]; outcome: string; message?: string };

function held(worker: LockWorker, fn: string, args: unknown, event = 'held'): { run: Promise<unknown>; seen: Promise<unknown> } {
  let seen!: (d: unknown) => void;
  const p = new Promise<unknown>((r) => (seen = r));
  const run = worker.run(SCENARIO, fn, args, (e, d) => e === event && seen(d));
  run.catch(() => undefined);
  return { run, seen: p };
}

async function setUpTables(db: TestDatabase): Promise<void> {
  await db.query(`CREATE TABLE cs_inside (id INT PRIMARY KEY, n INT NOT NULL DEFAULT 0, peak INT NOT NULL DEFAULT 0)${db.sql.tableOptions}`);
  await db.query('INSERT INTO cs_inside (id) VALUES (1)');
  await db.query(
    `CREATE TABLE cs_counter (k VARCHAR(32) PRIMARY KEY, v INT NOT NULL DEFAULT 0, last_token BIGINT, last_who VARCHAR(16))${db.sql.tableOptions}`,
  );
  await db.query(`CREATE TABLE cs_writes (id ${db.sql.autoId}, who VARCHAR(16) NOT NULL, token BIGINT NOT NULL)${db.sql.tableOptions}`);
}

async function reset(db: TestDatabase, keys: string[]): Promise<void> {
  await db.query('UPDATE cs_inside SET n = 0, peak = 0');
  await db.query('DELETE FROM cs_writes');
  for (const k of keys) await db.query(`INSERT INTO cs_counter (k) VALUES (?) ${db.sql.onDuplicateKey('k', 'v = 0')}`, [k]);
}

/** Dead rows (of `owner`) end EXPIRED, taken over; every later grant of the key starts no earlier than their lease end. */
async function assertTakenOverAfterLease(db: TestDatabase, key: string, deadOwner: string, permits = false): Promise<number> {
  const rows = await db.logRows(key);
  const dead = rows.filter((r) => r.owner === deadOwner);
  assert.equal(dead.length, 1, `${key}: one row of the dead holder`);
  assert.equal(dead[0]!.status, 'EXPIRED', `${key}: ${JSON.stringify(dead[0])}`);
  assert.match(String(dead[0]!.note), /taken over by/);
  const leaseEnd = (dead[0]!.lease_ends_at as Date).getTime();
  // A semaphore's other permits may be granted beside it: there only the taker counts.
  const taker = String(dead[0]!.note).replace('taken over by ', '');
  const later = rows.filter((r) => Number(r.id) > Number(dead[0]!.id) && (!permits || r.owner === taker));
  assert.ok(later.length >= 1, `${key}: a later grant`);
  for (const r of later) {
    const at = (r.acquired_at as Date).getTime();
    assert.ok(at >= leaseEnd, `${key}: granted ${leaseEnd - at} ms before the dead holder's lease ended`);
  }
  const first = (later[0]!.acquired_at as Date).getTime();
  assert.ok(first - leaseEnd < MARGIN_MS, `${key}: granted ${first - leaseEnd} ms after the lease ended`);
  const tokens = rows.filter((r) => r.status !== 'FAILED').map((r) => Number(r.fencing_token));
  for (let i = 1; i < tokens.length; i++) assert.ok(tokens[i]! > tokens[i - 1]!, `${key}: tokens ${tokens}`);
  return leaseEnd;
}

/** A suite's own database with the business tables, and `count` worker processes of `target` with a lease of `leaseMs`. */
function processesOf(
  target: ContractTarget,
  count: number,
  leaseMs: number,
): { db: TestDatabase; workers: LockWorker[]; options: DbLockModuleOptions } {
  const suite = {
    db: undefined as unknown as TestDatabase,
    workers: [] as LockWorker[],
    options: target.options({ leaseMs, retryMinDelayMs: 5, retryMaxDelayMs: 50, janitor: false }),
  };
  before(async () => {
    suite.db = await TestDatabase.forTarget(target);
    await setUpTables(suite.db);
    suite.workers = await LockWorker.startMany(count, { settings: suite.db.settings, options: suite.options });
  });
  after(async () => {
    for (const w of suite.workers) w.signal('SIGCONT'); // a test that failed may have left one stopped
    await Promise.all(suite.workers.map((w) => w.close()));
    await suite.db?.drop();
  });
  return suite;
}

contractSuite('crash-liveness-lease', 'SIGKILLed multi-key and write holders (lease)', { postgres: true }, (target) => {
  const suite = processesOf(target, 2, LEASE_MS);

  it('a holder of [a, b] killed: [b, c] and [a] are granted after its lease, not before; its rows end EXPIRED', async () => {
    await reset(suite.db, ['a', 'b', 'c']);
    const victim = await LockWorker.start({ settings: suite.db.settings, options: suite.options });
    try {
      await held(victim, 'keep', { keys: ['mk:a', 'mk:b'], leaseMs: LEASE_MS }).seen;
      await sleep(LEASE_MS / 2); // at least one renewal
      const [deadRow] = await suite.db.logRows('mk:a');
      const w1 = suite.workers[0]!.run<Bump>(SCENARIO, 'fencedBump', {
        keys: ['mk:b', 'mk:c'],
        counterKeys: ['b', 'c'],
        who: 'W1',
        leaseMs: 5_000,
        timeoutMs: 15_000,
        holdMs: 50,
      });
      const w2 = suite.workers[1]!.run<Bump>(SCENARIO, 'fencedBump', {
        keys: ['mk:a'],
        counterKeys: ['a'],
        who: 'W2',
        leaseMs: 5_000,
        timeoutMs: 15_000,
        holdMs: 50,
      });
      await sleep(100);
      await victim.kill();
      const [r1, r2] = await Promise.all([w1, w2]);
      assert.equal(r1.outcome, 'committed', JSON.stringify(r1));
      assert.equal(r2.outcome, 'committed', JSON.stringify(r2));
      await assertTakenOverAfterLease(suite.db, 'mk:a', String(deadRow!.owner));
      await assertTakenOverAfterLease(suite.db, 'mk:b', String(deadRow!.owner));
      const counters = await suite.db.query<{ k: string; v: number }[]>('SELECT k, v FROM cs_counter WHERE k IN (?, ?, ?) ORDER BY k', [
        'a',
        'b',
        'c',
      ]);
      assert.deepEqual(
        counters.map((c) => Number(c.v)),
        [1, 1, 1],
      );
    } finally {
      await victim.kill();
    }
  });

  it('a writer killed: a reader in another process is granted after its lease, not before', async () => {
    await reset(suite.db, ['rw']);
    const victim = await LockWorker.start({ settings: suite.db.settings, options: suite.options });
    try {
      await held(victim, 'keep', { keys: [{ key: 'rw:k', mode: 'write' }], leaseMs: LEASE_MS }).seen;
      await sleep(LEASE_MS / 2);
      const [deadRow] = await suite.db.logRows('rw:k');
      const reader = suite.workers[0]!.run<Bump>(SCENARIO, 'fencedBump', {
        keys: [{ key: 'rw:k', mode: 'read' }],
        counterKeys: ['rw'],
        who: 'R',
        leaseMs: 5_000,
        timeoutMs: 15_000,
        holdMs: 20,
      });
      await sleep(100);
      await victim.kill();
      assert.equal((await reader).outcome, 'committed');
      await assertTakenOverAfterLease(suite.db, 'rw:k', String(deadRow!.owner));
    } finally {
      await victim.kill();
    }
  });
});

contractSuite('fenced-commit', 'a plain lock signal after SIGSTOP past the lease (lease)', { postgres: true }, (target) => {
  const LEASE = 600;
  const STALL_MS = 2_500; // > 4 leases: the taker is granted while the holder is stopped
  const suite = processesOf(target, 1, LEASE);

  for (const round of [1, 2, 3]) {
    it(`round ${round}: the first read of signal.aborted after SIGCONT is true; the taker committed`, async () => {
      await reset(suite.db, ['sig']);
      const holder = await LockWorker.start({ settings: suite.db.settings, options: suite.options });
      try {
        const h = held(holder, 'sampleSignal', { key: `sig:${round}`, leaseMs: LEASE, maxMs: 15_000 });
        await h.seen;
        await sleep(round * 97);
        holder.signal('SIGSTOP');
        const took = await suite.workers[0]!.run<Bump>(SCENARIO, 'fencedBump', {
          keys: [`sig:${round}`],
          counterKeys: ['sig'],
          who: 'B',
          leaseMs: 5_000,
          timeoutMs: 10_000,
          holdMs: 0,
        });
        assert.equal(took.outcome, 'committed', JSON.stringify(took));
        await sleep(Math.max(0, STALL_MS - LEASE * 2));
        holder.signal('SIGCONT');
        const result = (await h.run) as { lateReads: unknown[]; longestGap: number; aborted: boolean; release: string };
        assert.equal(result.aborted, true);
        assert.equal(result.release, 'LockLostError', 'withLock reports the loss');
        assert.deepEqual(result.lateReads, [], `signal read not aborted after the stall: ${JSON.stringify(result)}`);
        const rows = await suite.db.logRows(`sig:${round}`);
        assert.equal(rows[0]!.status, 'EXPIRED');
      } finally {
        holder.signal('SIGCONT');
        await holder.kill();
      }
    });
  }
});

contractSuite('row-lock-stall', 'a stopped row-lock multi-key holder keeps both keys', { postgres: true }, (target) => {
  const suite = processesOf(target, 2, 300);

  it('holder of [m1, m2] stopped 3 s (10 leases): commits after SIGCONT; the [m2, m3] waiter commits after it, never beside it', async () => {
    await reset(suite.db, ['m1', 'm2', 'm3']);
    const [holder, waiter] = suite.workers as [LockWorker, LockWorker];
    const h = held(
      holder,
      'fencedBump',
      { keys: ['rl:m1', 'rl:m2'], counterKeys: ['m1', 'm2'], who: 'H', leaseMs: 300, timeoutMs: 10_000, holdMs: 400 },
      'granted',
    );
    await h.seen;
    holder.signal('SIGSTOP');
    const w = waiter.run<Bump>(SCENARIO, 'fencedBump', {
      keys: ['rl:m2', 'rl:m3'],
      counterKeys: ['m2', 'm3'],
      who: 'W',
      leaseMs: 300,
      timeoutMs: 15_000,
      holdMs: 0,
    });
    await sleep(3_000);
    const [mid] = await suite.db.query<{ n: number }[]>('SELECT COUNT(*) AS n FROM cs_writes');
    assert.equal(Number(mid!.n), 0, 'nobody committed while the holder was stopped');
    holder.signal('SIGCONT');
    const [hr, wr] = (await Promise.all([h.run, w])) as [Bump, Bump];
    assert.equal(hr.outcome, 'committed', JSON.stringify(hr));
    assert.equal(wr.outcome, 'committed', JSON.stringify(wr));
    const writes = await suite.db.query<{ who: string }[]>('SELECT who FROM cs_writes ORDER BY id');
    assert.deepEqual(
      writes.map((x) => x.who),
      ['H', 'W'],
    );
    const [inside] = await suite.db.query<{ peak: number }[]>('SELECT peak FROM cs_inside WHERE id = 1');
    assert.equal(Number(inside!.peak), 1, 'two holders inside at once');
    const m2 = await suite.db.logRows('rl:m2');
    assert.deepEqual(
      m2.map((r) => r.status),
      ['RELEASED', 'RELEASED'],
    );
    assert.ok(Number(m2[1]!.fencing_token) > Number(m2[0]!.fencing_token));
  });

  it('negative control: the same detector sees two inside at once on distinct keys', async () => {
    await reset(suite.db, ['x', 'y']);
    const runs = [
      suite.workers[0]!.run<Bump>(SCENARIO, 'fencedBump', {
        keys: ['nc:x'],
        counterKeys: ['x'],
        who: 'X',
        leaseMs: 300,
        timeoutMs: 5_000,
        holdMs: 500,
      }),
      suite.workers[1]!.run<Bump>(SCENARIO, 'fencedBump', {
        keys: ['nc:y'],
        counterKeys: ['y'],
        who: 'Y',
        leaseMs: 300,
        timeoutMs: 5_000,
        holdMs: 500,
      }),
    ];
    await Promise.all(runs);
    const [inside] = await suite.db.query<{ peak: number }[]>('SELECT peak FROM cs_inside WHERE id = 1');
    assert.equal(Number(inside!.peak), 2);
  });
});

contractSuite('holder-connection', 'a SIGKILLed row-lock multi-key holder', { postgres: true }, (target) => {
  const suite = processesOf(target, 1, 5_000);

  it('frees both keys at once (well within its 5 s lease setting); no row of the dead hold', async () => {
    await reset(suite.db, ['d1', 'd2']);
    const victim = await LockWorker.start({ settings: suite.db.settings, options: suite.options });
    try {
      await held(victim, 'keep', { keys: ['dk:1', 'dk:2'], leaseMs: 5_000 }).seen;
      const w = suite.workers[0]!.run<Bump>(SCENARIO, 'fencedBump', {
        keys: ['dk:2', 'dk:1'],
        counterKeys: ['d1', 'd2'],
        who: 'W',
        leaseMs: 5_000,
        timeoutMs: 15_000,
        holdMs: 0,
      });
      await sleep(300);
      const killedAt = performance.now();
      await victim.kill();
      const r = await w;
      const elapsed = performance.now() - killedAt;
      assert.equal(r.outcome, 'committed', JSON.stringify(r));
      assert.ok(elapsed < MARGIN_MS, `granted ${Math.round(elapsed)} ms after the kill`);
      for (const key of ['dk:1', 'dk:2']) {
        const rows = await suite.db.logRows(key);
        assert.deepEqual(
          rows.map((x) => x.status),
          ['RELEASED'],
          `${key}: ${JSON.stringify(rows)}`,
        );
      }
    } finally {
      await victim.kill();
    }
  });
});

contractSuite('semaphore', 'limit 2, one permit holder killed, the other alive', { postgres: true }, (target) => {
  const suite = processesOf(target, 2, LEASE_MS);

  it('the waiter gets the dead permit after its lease; the live permit (renewed past its own lease) stays and is released', async () => {
    const key = 'sem:half';
    const victim = await LockWorker.start({ settings: suite.db.settings, options: suite.options });
    try {
      await held(victim, 'keepPermit', { key, limit: 2, leaseMs: LEASE_MS }).seen;
      const live = held(suite.workers[0]!, 'keepPermit', { key, limit: 2, leaseMs: LEASE_MS, releaseAfterMs: 4_000 });
      await live.seen;
      const [deadRow] = await suite.db.logRows(key);
      const third = suite.workers[1]!.run<{ token: number }>(SCENARIO, 'keepPermit', { key, limit: 2, leaseMs: LEASE_MS, releaseAfterMs: 10 });
      await sleep(200);
      await victim.kill();
      const t3 = await third;
      assert.equal(t3.token, 3);
      const l = (await live.run) as { token: number; aborted: boolean };
      assert.equal(l.aborted, false, 'the live permit was lost');
      const rows = await suite.db.logRows(key);
      assert.deepEqual(
        rows.map((r) => r.status),
        ['EXPIRED', 'RELEASED', 'RELEASED'],
      );
      assert.equal(rows[1]!.note ?? null, null);
      await assertTakenOverAfterLease(suite.db, key, String(deadRow!.owner), true);
    } finally {
      await victim.kill();
    }
  });
});
