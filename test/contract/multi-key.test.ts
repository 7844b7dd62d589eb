import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import { TestDatabase } from '../support/test-database.js';
import { createLockApp } from '../support/lock-app.js';
import { LockWorker } from '../support/worker-host.js';
import { contractSuite, gapOf } from '../support/contract-targets.js';
import { InvalidLockKeyError, DbLockOptionsError, LockTimeoutError, MAX_KEYS_PER_LOCK, type LockService } from '../../lib/index.js';
import { PROBE_TABLE_SQL } from './scenarios/read-write.js';
import type { MultiLoopArgs } from './scenarios/multi-key.js';
import { analyseIntervals, holdIntervals, probe } from './rw-probe.js';
import { callerTrips } from '../support/round-trips.js';

const SCENARIOS = new URL('./scenarios/multi-key.js', import.meta.url).href;

/** Multi-key locks: one global order, all-or-nothing, mixed modes. */
contractSuite('multi-key', 'multi-key locks', { postgres: true }, (target) => {
  let db: TestDatabase;
  let app: INestApplicationContext;
  let locks: LockService;
  before(async () => {
    db = await TestDatabase.forTarget(target);
    await db.query(PROBE_TABLE_SQL + db.sql.tableOptions);
    await db.query('INSERT INTO rw_probe (id) VALUES (11), (12), (13)');
    // No janitor: its cluster-wide lock goes through the lock path, and a tick mid-test would add to the lock round trips counted here.
    ({ app, locks } = await createLockApp(db.settings, target.options({ leaseMs: 10_000, namespace: 'p2p', janitor: false })));
  });
  after(async () => {
    await app?.close();
    await db?.drop();
  });

  it('keys are de-duplicated and sorted by stored bytes; one log row per key, one owner', async () => {
    const lock = await locks.acquire(['loan:b', 'loan:a', 'Loan:z', 'loan:b', 'loan:é', { key: 'loan:a', mode: 'read' }]);
    assert.deepEqual(lock.keys, ['Loan:z', 'loan:a', 'loan:b', 'loan:é'], 'byte order: uppercase first, UTF-8 multi-byte last');
    assert.deepEqual(
      lock.modes,
      { 'Loan:z': 'write', 'loan:a': 'write', 'loan:b': 'write', 'loan:é': 'write' },
      'a key asked in both modes is taken for writing',
    );
    // A row-lock writes its rows in the commit that ends the hold; a lease at the grant.
    if (target.capabilities.has('holder-connection')) await lock.release();
    const rows = await db.query<{ owner: string; lock_key: Buffer }[]>('SELECT owner, lock_key FROM db_lock_log ORDER BY id');
    assert.equal(rows.length, 4);
    assert.equal(new Set(rows.map((r) => r.owner)).size, 1, 'one acquisition, one owner');
    assert.deepEqual(rows.map((r) => r.lock_key.toString()).sort(), ['p2p:Loan:z', 'p2p:loan:a', 'p2p:loan:b', 'p2p:loan:é']);
    assert.deepEqual(Object.keys(lock.fencingTokens).sort(), [...lock.keys].sort());
    await lock.release();
    assert.equal((await liveRows(db)).length, 0);
  });

  it('bad multi-key input is refused before any SQL', async () => {
    const before = callerTrips(locks);
    await assert.rejects(locks.acquire([]), InvalidLockKeyError);
    await assert.rejects(locks.acquire(['a', 7 as unknown as string]), InvalidLockKeyError);
    await assert.rejects(locks.acquire([{ key: 'a', mode: 'exclusive' as 'read' }]), DbLockOptionsError);
    await assert.rejects(locks.acquire(Array.from({ length: MAX_KEYS_PER_LOCK + 1 }, (_, i) => `k${i}`)), InvalidLockKeyError);
    assert.equal(callerTrips(locks), before);
  });

  it('all-or-nothing: a timeout on one key leaves nothing held on the others', async () => {
    const blocker = await locks.acquire('claim:2', { mode: 'write' });
    await assert.rejects(locks.acquire(['claim:1', 'claim:2', 'claim:3'], { timeoutMs: 300 }), LockTimeoutError);
    await assert.rejects(
      locks.acquire(
        [
          { key: 'claim:1', mode: 'read' },
          { key: 'claim:2', mode: 'read' },
        ],
        { timeoutMs: 0 },
      ),
      LockTimeoutError,
    );
    const live = await liveRows(db);
    assert.deepEqual(
      live.map((r) => r.lock_key),
      // A row-lock blocker has no live row: it is its open transaction.
      target.capabilities.has('holder-connection') ? [] : ['p2p:claim:2'],
      'only the blocker is live',
    );
    assert.equal((await db.logRows('p2p:claim:1')).length + (await db.logRows('p2p:claim:3')).length, 0, 'no row was ever written for the free keys');
    assert.notEqual(await locks.tryAcquire('claim:1').then((l) => l?.release().then(() => 'free')), undefined);
    await blocker.release();
  });

  it(
    'all-or-nothing: a grant killed at the deadline (blocked on a key row) leaves nothing held',
    { skip: gapOf('bounded-wait-blocked-grant', target) },
    async () => {
      // A foreign transaction holds the key row of claim:5: the grant blocks in the database, past the caller's deadline.
      await locks.withLock('claim:5', () => undefined); // creates the key row
      const letGo = await db.holdKeyRow('p2p:claim:5');
      try {
        const outcome = await locks.acquire(['claim:4', 'claim:5'], { timeoutMs: 100 }).then(
          (l) => l,
          (e: unknown) => e,
        );
        assert.ok(outcome instanceof Error, 'not granted');
        assert.ok(outcome instanceof LockTimeoutError, `a caller past its deadline gets LockTimeoutError, got ${(outcome as Error).name}`);
      } finally {
        await letGo();
      }
      assert.deepEqual(await liveRows(db), []);
      assert.equal((await db.logRows('p2p:claim:4')).filter((r) => r.status !== 'RELEASED').length, 0);
    },
  );

  it('[A, B] and [B, A] in a loop in two processes (plus single keys in a third): no deadlock, no partial hold, only typed errors', async (t) => {
    await db.query('DELETE FROM db_lock_log WHERE lock_key IN (?, ?)', [Buffer.from('p2p:loan:A'), Buffer.from('p2p:loan:B')]);
    await db.query('UPDATE rw_probe SET readers = 0, writers = 0, violations = 0 WHERE id IN (11, 12)');
    const workers = await LockWorker.startMany(3, {
      settings: db.settings,
      // The probe rows are written through the DataSource on purpose (the lock alone must exclude).
      options: target.options({ leaseMs: 10_000, namespace: 'p2p', retryMaxDelayMs: 50, escapedWrites: 'ignore' }),
    });
    try {
      const probeIds = { 'loan:A': 11, 'loan:B': 12 };
      const base = { probeIds, holdMs: 1, timeoutMs: 5000 } satisfies Partial<MultiLoopArgs>;
      const A = 'loan:A';
      const B = 'loan:B';
      const runs = await Promise.all([
        workers[0]!.run<Awaited<ReturnType<typeof import('./scenarios/multi-key.js').multiLoop>>>(SCENARIOS, 'multiLoop', {
          ...base,
          iterations: 250,
          sets: [
            [{ key: A }, { key: B }],
            [{ key: A, mode: 'read' }, { key: B }],
          ],
        }),
        workers[1]!.run<Awaited<ReturnType<typeof import('./scenarios/multi-key.js').multiLoop>>>(SCENARIOS, 'multiLoop', {
          ...base,
          iterations: 250,
          sets: [
            [{ key: B }, { key: A }],
            [
              { key: B, mode: 'read' },
              { key: A, mode: 'read' },
            ],
          ],
        }),
        workers[2]!.run<Awaited<ReturnType<typeof import('./scenarios/multi-key.js').multiLoop>>>(SCENARIOS, 'multiLoop', {
          ...base,
          iterations: 250,
          sets: [[{ key: A }], [{ key: B, mode: 'read' }], [{ key: B }]],
        }),
      ]);
      t.diagnostic(`done=${runs.map((r) => r.done).join('/')} timeouts=${runs.map((r) => r.timeouts).join('/')}`);
      for (const run of runs) {
        assert.deepEqual(run.errors, [], 'no error other than LockTimeoutError');
        assert.equal(run.timeouts, 0, 'no caller waited 5 s: nothing deadlocked');
      }
      assert.deepEqual(runs[1]!.keyOrders, [[A, B]], '[B, A] is taken as [A, B]');
      for (const id of [11, 12]) {
        const p = await probe(db, id);
        assert.equal(p.violations, 0, `key ${id}: no writer overlapped anyone`);
        assert.deepEqual([p.readers, p.writers], [0, 0]);
      }
      assert.deepEqual(await liveRows(db), []);
      for (const key of [A, B]) {
        const holds = await holdIntervals(db, `p2p:${key}`);
        assert.equal(analyseIntervals(holds).writeOverlaps, 0);
        assert.ok(holds.every((h) => h.status === 'RELEASED'));
      }
      // No partial hold: every two-key acquisition has exactly one row per key, granted together.
      const partial = await db.query<unknown[]>(
        `SELECT owner FROM db_lock_log WHERE lock_key IN (?, ?) GROUP BY owner HAVING COUNT(*) NOT IN (1, 2) OR ${db.sql.notOneGrant('MIN(acquired_at)', 'MAX(acquired_at)')}`,
        [Buffer.from(`p2p:${A}`), Buffer.from(`p2p:${B}`)],
      );
      assert.equal(partial.length, 0, 'each acquisition got all its keys in one grant');
      const pairs = await db.query<{ n: number }[]>(
        `SELECT COUNT(*) AS n FROM (SELECT owner FROM db_lock_log WHERE lock_key IN (?, ?) GROUP BY owner HAVING COUNT(*) = 2) x`,
        [Buffer.from(`p2p:${A}`), Buffer.from(`p2p:${B}`)],
      );
      assert.equal(Number(pairs[0]!.n), runs[0]!.done + runs[1]!.done);
    } finally {
      await Promise.all(workers.map((w) => w.close()));
    }
  });

  it('mixed modes: [loan write, claims read] excludes the loan but shares the claims', async () => {
    const repay = await locks.acquire([
      { key: 'loan:7', mode: 'write' },
      { key: 'claim:70', mode: 'read' },
    ]);
    assert.deepEqual(repay.modes, { 'claim:70': 'read', 'loan:7': 'write' });
    const transfer = await locks.tryAcquire([{ key: 'claim:70', mode: 'read' }]);
    assert.ok(transfer, 'another reader of the claim gets in');
    assert.equal(await locks.tryAcquire('loan:7', { mode: 'read' }), null, 'the loan is excluded for readers');
    assert.equal(await locks.tryAcquire('claim:70', { mode: 'write' }), null, 'the claim is excluded for writers');
    await transfer.release();
    await repay.release();
    const rows = await db.query<{ mode: string; k: string }[]>(
      `SELECT mode, ${db.sql.keyText('lock_key')} AS k FROM db_lock_log WHERE owner = (SELECT owner FROM db_lock_log WHERE lock_key = ? ORDER BY id LIMIT 1) ORDER BY k`,
      [Buffer.from('p2p:loan:7')],
    );
    assert.deepEqual(
      rows.map((r) => [r.k, r.mode]),
      [
        ['p2p:claim:70', 'read'],
        ['p2p:loan:7', 'write'],
      ],
    );
  });
});

async function liveRows(db: TestDatabase): Promise<{ lock_key: string; owner: string }[]> {
  const rows = await db.query<{ lock_key: Buffer; owner: string }[]>(
    "SELECT lock_key, owner FROM db_lock_log WHERE status IN ('ACQUIRED', 'COMPLETED') ORDER BY id",
  );
  return rows.map((r) => ({ lock_key: r.lock_key.toString(), owner: r.owner })).map((r) => ({ lock_key: r.lock_key, owner: r.owner }));
}
