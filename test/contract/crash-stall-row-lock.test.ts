import { it } from 'node:test';
import assert from 'node:assert/strict';
import { contractSuite } from '../support/contract-targets.js';
import { type Bump, held, MARGIN_MS, processesOf, reset, SCENARIO, sleep } from '../support/crash-stall-processes.js';
import { LockWorker } from '../support/worker-host.js';

/**
 * Crash and stall semantics of row-lock multi-key holders with several processes: a stopped holder
 * keeps both keys and commits first (a negative control shows the detector sees overlap); a dead
 * holder frees its keys at once.
 */
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
