import { it } from 'node:test';
import assert from 'node:assert/strict';
import { contractSuite } from '../support/contract-targets.js';
import { assertTakenOverAfterLease, type Bump, held, LEASE_MS, processesOf, reset, SCENARIO, sleep } from '../support/crash-stall-processes.js';
import { LockWorker } from '../support/worker-host.js';

/**
 * Crash and stall semantics of lease holders with several processes that the other suites do not
 * drive: a SIGKILLed multi-key or write holder's keys come back after its lease and never before;
 * a plain lock's signal reads aborted as soon as its stopped process resumes past the lease; a
 * semaphore permit of a dead process is taken over while a live process's permit is left alone.
 * Margins: grants within lease + 2 s (a loaded 2-core machine). Row-lock holders:
 * crash-stall-row-lock.test.ts.
 */
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
