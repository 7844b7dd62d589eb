import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { TestDatabase } from '../support/test-database.js';
import { LockWorker } from '../support/worker-host.js';
import { DB_LOCK_DEFAULTS } from '../../lib/index.js';
import { PROBE_TABLE_SQL } from '../contract/scenarios/read-write.js';
import { analyseIntervals, holdIntervals, probe, summarise } from '../contract/rw-probe.js';
import { contractSuite } from '../support/contract-targets.js';

const SCENARIOS = new URL('../contract/scenarios/read-write.js', import.meta.url).href;
const BASIC = new URL('../support/scenarios/basic.js', import.meta.url).href;
/** Default backoff (retryMinDelayMs 10, retryMaxDelayMs 200): the bound below is about the defaults. */
const RETRY_MAX_MS = DB_LOCK_DEFAULTS.retryMaxDelayMs;
const LEASE_MS = 1500;
/**
 * Slack for round trips and scheduling on a shared 2-core test machine. The protocol itself adds
 * a few round trips (ms; measured writer waits stay under ~350 ms here); this epsilon is what an
 * overloaded CI box needs on top. Without writer preference the same writer waits > 5 s.
 */
const EPSILON_MS = 1000;

/**
 * Writer preference (liveness for writers) and reader crash recovery (a crashed reader's key frees), with
 * readers in 3 processes and the writer in a 4th, so no local wake-up helps the writer.
 */
contractSuite('lease-writer-preference', 'read/write liveness: writer preference and crashed readers', { postgres: true }, (target) => {
  let db: TestDatabase;
  let workers: LockWorker[];
  before(async () => {
    db = await TestDatabase.forTarget(target);
    await db.query(PROBE_TABLE_SQL + db.sql.tableOptions);
    await db.query('INSERT INTO rw_probe (id) VALUES (1), (2), (3), (4)');
    workers = await LockWorker.startMany(4, { settings: db.settings, options: target.options({ leaseMs: LEASE_MS }) });
  });
  after(async () => {
    await Promise.all((workers ?? []).map((w) => w.close()));
    await db?.drop();
  });

  it('under a continuous stream of readers a writer waits at most holdMs + retryMaxDelayMs + epsilon', async (t) => {
    const HOLD_MS = 20;
    const stopAt = Date.now() + 8000;
    const readers = [0, 0, 1, 1, 2, 2].map((w) =>
      workers[w]!.run<{ sections: number }>(SCENARIOS, 'streamReader', { key: 'loan:7', stopAt, holdMs: HOLD_MS, probeId: 1 }),
    );
    // The writer stops asking timeoutMs before stopAt (its last wait must still meet the stream of
    // readers), so its timeout, well above the bound it is held to, sets how much of the window it
    // samples: 3 s of timeout leave it 5 s, 10 or more waits even on a loaded host.
    const writer = workers[3]!.run<{ waits: number[]; timeouts: number }>(SCENARIOS, 'periodicWriter', {
      key: 'loan:7',
      stopAt,
      everyMs: 40,
      timeoutMs: 3000,
      probeId: 1,
    });
    const [{ waits, timeouts }, ...readerResults] = await Promise.all([writer, ...readers]);
    const p = await probe(db, 1);
    const w = summarise(waits);
    const bound = HOLD_MS + RETRY_MAX_MS + EPSILON_MS;
    t.diagnostic(
      `writer wait ms ${JSON.stringify(w)} (bound ${bound}); reader sections=${readerResults.reduce((a, r) => a + r.sections, 0)} ` +
        `max concurrent readers=${p.max_readers} avg at entry=${(p.reader_sum / p.reader_entries).toFixed(2)}`,
    );
    assert.equal(p.violations, 0);
    assert.equal(timeouts, 0, 'the writer never timed out');
    assert.ok(w.count >= 10, `the writer got the key repeatedly (${w.count} times)`);
    assert.ok(p.max_readers > 1, 'readers shared the key meanwhile');
    assert.ok(
      readerResults.every((r) => r.sections > 0),
      'every reader got in',
    );
    assert.ok(w.max <= bound, `writer wait ${w.max} ms must stay within ${bound} ms`);
  });

  it('readers that never leave the key free: a writer gets in with writer preference, starves without it', async (t) => {
    // Writer preference on (these workers): readers are held back, those inside leave after maxHoldMs.
    const MAX_HOLD_MS = 300;
    let stopAt = Date.now() + 4000;
    const readersOn = [0, 0, 0, 1, 1, 1].map((w) =>
      workers[w]!.run(SCENARIOS, 'overlappingReader', { key: 'loan:8', stopAt, maxHoldMs: MAX_HOLD_MS, probeId: 2 }),
    );
    const writerOn = await workers[3]!.run<{ waits: number[]; timeouts: number }>(SCENARIOS, 'periodicWriter', {
      key: 'loan:8',
      stopAt,
      everyMs: 200,
      timeoutMs: 1500,
      probeId: 2,
    });
    await Promise.all(readersOn);

    // The same readers against workers with writerPreference: false.
    const off = await LockWorker.startMany(3, { settings: db.settings, options: target.options({ leaseMs: LEASE_MS, writerPreference: false }) });
    let writerOff: { waits: number[]; timeouts: number };
    let readersOff: { sections: number; forcedLeaves: number }[];
    try {
      stopAt = Date.now() + 5000;
      const readers = [0, 0, 0, 1, 1, 1].map((w) =>
        off[w]!.run<{ sections: number; forcedLeaves: number }>(SCENARIOS, 'overlappingReader', {
          key: 'loan:9',
          stopAt,
          maxHoldMs: 60_000,
          probeId: 3,
        }),
      );
      // Let the readers overlap first (two inside), then the writer tries, 1.5 s at a time.
      await waitFor(async () => (await probe(db, 3)).readers >= 2);
      writerOff = await off[2]!.run(SCENARIOS, 'periodicWriter', { key: 'loan:9', stopAt, everyMs: 10, timeoutMs: 1500, probeId: 3 });
      readersOff = await Promise.all(readers);
    } finally {
      await Promise.all(off.map((w) => w.close()));
    }
    const on = summarise(writerOn.waits);
    t.diagnostic(
      `preference on: writer wait ms ${JSON.stringify(on)}, timeouts ${writerOn.timeouts}; ` +
        `preference off: writer got in ${writerOff.waits.length} times, timed out ${writerOff.timeouts} times (1.5 s each)`,
    );
    assert.equal(writerOn.timeouts, 0);
    assert.ok(on.count > 0 && on.max <= MAX_HOLD_MS + RETRY_MAX_MS + EPSILON_MS, `with preference: within maxHold + retry (${on.max} ms)`);
    assert.ok(writerOff.timeouts >= 2, 'without preference the writer starves');
    assert.equal(writerOff.waits.length, 0, 'without preference the writer never got in while readers overlapped');
    // maxHoldMs is 60 s here: a reader leaves unconditionally only when the run stops, never in between.
    assert.ok(
      readersOff.every((r) => r.forcedLeaves <= 1 && r.sections > 1),
      'readers kept coming and going, never leaving the key free',
    );
    for (const id of [2, 3]) assert.equal((await probe(db, id)).violations, 0);
  });

  it(`a SIGKILLed reader blocks a writer at most its lease (${LEASE_MS} ms) + retryMaxDelayMs, while other readers come and go`, async (t) => {
    const victim = await LockWorker.start({ settings: db.settings, options: target.options({ leaseMs: LEASE_MS }) });
    try {
      await victim.run(BASIC, 'acquireAndKeep', { key: 'loan:10', mode: 'read' });
      const stopAt = Date.now() + 6000;
      const readers = [0, 1].map((w) => workers[w]!.run(SCENARIOS, 'streamReader', { key: 'loan:10', stopAt, holdMs: 15, probeId: 4 }));
      await waitFor(async () => (await probe(db, 4)).reader_entries >= 4);
      let acquiredAt = 0;
      const writer = workers[3]!.run<{ waitedMs: number; owner: string }>(SCENARIOS, 'writeOnce', { key: 'loan:10', timeoutMs: 5000 }, () => {
        acquiredAt = performance.now();
      });
      // The writer is now waiting on the victim (and holds new readers back); kill the victim.
      await waitFor(
        async () =>
          (
            await db.query<unknown[]>(`SELECT 1 FROM db_lock WHERE lock_key = ? AND writer_waiting_until > ${db.sql.utcNow}`, [
              Buffer.from('loan:10'),
            ])
          ).length > 0,
      );
      const killedAt = performance.now();
      await victim.kill();
      const { owner } = await writer;
      await Promise.all(readers);
      const afterKillMs = acquiredAt - killedAt;

      const holds = await holdIntervals(db, 'loan:10');
      const dead = holds.find((h) => h.holder.endsWith(`:${victim.pid}`))!;
      const won = holds.find((h) => h.owner === owner)!;
      const gapMs = (won.start - dead.end) / 1000; // server clock: writer grant minus the dead reader's lease end
      t.diagnostic(
        `writer got the key ${Math.round(afterKillMs)} ms after the kill; ${gapMs.toFixed(1)} ms after the dead reader's lease ended (server clock)`,
      );
      assert.equal(dead.status, 'EXPIRED', 'the dead reader was taken over');
      assert.ok(gapMs >= 0, 'never before the lease ran out');
      assert.ok(gapMs <= RETRY_MAX_MS + EPSILON_MS, `writer got in within retryMaxDelayMs + epsilon of the lease end (${gapMs} ms)`);
      assert.ok(afterKillMs <= LEASE_MS + RETRY_MAX_MS + EPSILON_MS, `and within lease + retryMaxDelayMs of the kill (${afterKillMs} ms)`);
      assert.equal(analyseIntervals(holds.filter((h) => h !== dead)).writeOverlaps, 0);
      assert.equal((await probe(db, 4)).violations, 0);
    } finally {
      await victim.kill();
    }
  });

  it('a waiting writer that crashes holds new readers back at most 2 x retryMaxDelayMs + 500 ms', async (t) => {
    const MARK_MS = 2 * RETRY_MAX_MS + 500; // the longest "writer waiting" mark a writer leaves behind
    const holder = workers[0]!.run(SCENARIOS, 'readThenRelease', { key: 'loan:11', holdMs: 4000, leaseMs: LEASE_MS });
    await waitFor(async () => (await liveHolders(db, 'loan:11')) === 1);
    const victim = await LockWorker.start({ settings: db.settings, options: target.options({ leaseMs: LEASE_MS }) });
    try {
      const writer = victim.run(SCENARIOS, 'writeOnce', { key: 'loan:11', timeoutMs: 30_000 }).catch(() => undefined);
      await waitFor(async () => (await markLeftMs(db, 'loan:11')) > 0);
      await victim.kill();
      await writer;
    } finally {
      await victim.kill();
    }
    const markLeft = await markLeftMs(db, 'loan:11');
    const { waitedMs } = await workers[1]!.run<{ waitedMs: number }>(SCENARIOS, 'readOnce', { key: 'loan:11', timeoutMs: 5000 });
    t.diagnostic(`mark left at the kill ${Math.round(markLeft)} ms; a new reader waited ${Math.round(waitedMs)} ms`);
    assert.ok(markLeft > 0 && markLeft <= MARK_MS, `the dead writer's mark ran at most ${MARK_MS} ms (${markLeft})`);
    assert.ok(waitedMs <= MARK_MS + EPSILON_MS, `the reader got in once the mark ran out (${waitedMs} ms)`);
    await holder;
  });
});

async function waitFor(check: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error('condition not reached in time');
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Live, unexpired holders of a key. */
async function liveHolders(db: TestDatabase, key: string): Promise<number> {
  const rows = await db.query<{ n: number }[]>(
    "SELECT COUNT(*) AS n FROM db_lock_log g LEFT JOIN db_lock_process p ON p.id = g.process_id WHERE g.lock_key = ? AND g.status IN ('ACQUIRED', 'COMPLETED') " +
      `AND ${db.sql.leaseEndsAt('g', 'p')} > ${db.sql.utcNow}`,
    [Buffer.from(key)],
  );
  return Number(rows[0]!.n);
}

/** How long the key's "writer waiting" mark still holds new readers back, in ms (server clock; <= 0: none). */
async function markLeftMs(db: TestDatabase, key: string): Promise<number> {
  const rows = await db.query<{ left_us: number | null }[]>(
    `SELECT ${db.sql.micros('writer_waiting_until')} - ${db.sql.micros(db.sql.utcNow)} AS left_us FROM db_lock WHERE lock_key = ?`,
    [Buffer.from(key)],
  );
  return rows[0]?.left_us == null ? 0 : Number(rows[0].left_us) / 1000;
}
