import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { TestDatabase } from '../support/test-database.js';
import { createLockApp, eventually } from '../support/lock-app.js';
import { type LockHandle, LockLostError, type LockService } from '../../lib/index.js';
import { acquisitionIdOf, freeze, partsOf, rowIdsOf, stall, thaw } from '../support/lock-internals.js';
import { contractSuite } from '../support/contract-targets.js';

/** Fencing tokens and the fence work per reader: each reader has its own grant, row and lease. */
contractSuite('lease-takeover', 'fencing for readers', { postgres: true }, (target) => {
  let db: TestDatabase;
  let app: INestApplicationContext;
  let locks: LockService;
  before(async () => {
    db = await TestDatabase.forTarget(target);
    ({ app, locks } = await createLockApp(db.settings, target.options({ leaseMs: 5000 })));
  });
  after(async () => {
    await app?.close();
    await db?.drop();
  });
  /**
   * Waits until no live holder is left by the server clock. (A waiter in the stalled holder's own
   * process does not poll while that holder is live locally, so the takeover is the first try.)
   */
  const leaseOver = (key: string): Promise<void> =>
    eventually(async () => (await locks.inspect(key)).holders.length === 0, 5000, `the lease on ${key} to run out`);

  it("every reader's grant takes the key's next token; the next writer's is higher still", async () => {
    const readers = [];
    for (let i = 0; i < 3; i++) readers.push(await locks.acquire('loan:1', { mode: 'read' }));
    assert.deepEqual(
      readers.map((r) => r.fencingToken),
      [1, 2, 3],
    );
    const info = await locks.inspect('loan:1');
    assert.equal(info.fencingToken, 3);
    assert.deepEqual(
      info.holders.map((h) => [h.mode, h.fencingToken]),
      [
        ['read', 1],
        ['read', 2],
        ['read', 3],
      ],
    );
    for (const r of readers) await r.release();
    const writer = await locks.acquire('loan:1');
    assert.equal(writer.fencingToken, 4);
    await writer.release();
  });

  it('a reader whose lease a writer took over gets LockLostError on release; the writer is untouched', async () => {
    const stale = await locks.acquire('loan:2', { mode: 'read', leaseMs: 200 });
    await stall(locks, stale); // a stalled reader: nothing renews it
    await leaseOver('loan:2');
    const writer = await locks.acquire('loan:2', { mode: 'write', timeoutMs: 3000 });
    assert.ok(writer.fencingToken > stale.fencingToken);
    const error = await stale.release().then(
      () => undefined,
      (e: unknown) => e,
    );
    assert.ok(error instanceof LockLostError, `expected LockLostError, got ${String(error)}`);
    assert.equal(error.key, 'loan:2');
    assert.equal(error.fencingToken, stale.fencingToken);
    assert.ok(stale.signal.aborted && stale.signal.reason instanceof LockLostError, "the stale reader's signal is aborted");
    assert.deepEqual(
      (await locks.inspect('loan:2')).holders.map((h) => h.owner),
      [acquisitionIdOf(writer)],
      'the writer still holds',
    );
    await writer.release();
    const rows = await db.logRows('loan:2');
    assert.deepEqual(
      rows.map((r) => [r.mode, r.status]),
      [
        ['read', 'EXPIRED'],
        ['write', 'RELEASED'],
      ],
    );
    assert.equal(rows[0]!.note, `taken over by ${acquisitionIdOf(writer)}`);
  });

  it('the watchdog of a live reader tells it when a writer took its share over', async () => {
    const reader = await locks.acquire('loan:3', { mode: 'read', leaseMs: 300 });
    freeze(locks); // the reader's process stalls
    await leaseOver('loan:3');
    const writer = await locks.acquire('loan:3', { timeoutMs: 3000 });
    thaw(locks); // the stalled process resumes: its next renewal learns its row was ended
    await eventually(() => reader.signal.aborted, 3000, 'the reader to learn it lost its share');
    assert.ok(reader.signal.reason instanceof LockLostError);
    await writer.release();
  });

  it('each reader fences its own hold: the fence commits for a live reader and refuses a taken-over one', async () => {
    const dataSource = app.get(DataSource);
    // The fence a fenced commit runs for a lock that stays held (the store's own, on either server): its live rows are written.
    const fence = async (handle: LockHandle): Promise<number> =>
      dataSource.transaction(async (manager) =>
        partsOf(locks).store.fence.fenceKept(manager.queryRunner!, rowIdsOf(handle), acquisitionIdOf(handle)),
      );
    const r1 = await locks.acquire('loan:4', { mode: 'read' });
    const r2 = await locks.acquire('loan:4', { mode: 'read' });
    assert.equal(await fence(r1), 1);
    const statuses = async (): Promise<string[]> => (await db.logRows('loan:4')).map((r) => String(r.status));
    assert.deepEqual(await statuses(), ['COMPLETED', 'ACQUIRED'], "only the first reader's row was fenced");
    await r1.release();
    await r2.release();

    const stale = await locks.acquire('loan:4', { mode: 'read', leaseMs: 200 });
    await stall(locks, stale);
    await leaseOver('loan:4');
    const writer = await locks.acquire('loan:4', { timeoutMs: 3000 });
    assert.equal(await fence(stale), 0, 'a taken-over reader cannot fence: its business transaction must roll back');
    await writer.release();
    await assert.rejects(stale.release(), LockLostError);
    assert.deepEqual(await statuses(), ['RELEASED', 'RELEASED', 'EXPIRED', 'RELEASED']);
  });

  it('a reader process stopped (SIGSTOP) past its lease is taken over by a writer and learns it when it resumes', async () => {
    const { LockWorker } = await import('../support/worker-host.js');
    const worker = await LockWorker.start({ settings: db.settings, options: target.options({ leaseMs: 500 }) });
    try {
      let acquired!: () => void;
      const acquiredNow = new Promise<void>((resolve) => (acquired = resolve));
      const reader = worker.run<{ fencingToken: number; release: string; aborted: boolean }>(
        new URL('../contract/scenarios/read-write.js', import.meta.url).href,
        'readThenRelease',
        { key: 'loan:5', holdMs: 1500, leaseMs: 500 },
        () => acquired(),
      );
      await acquiredNow;
      worker.signal('SIGSTOP');
      const writer = await locks.acquire('loan:5', { timeoutMs: 5000 });
      worker.signal('SIGCONT');
      const result = await reader;
      assert.equal(result.release, 'LockLostError');
      assert.ok(writer.fencingToken > result.fencingToken);
      assert.deepEqual(
        (await locks.inspect('loan:5')).holders.map((h) => h.mode),
        ['write'],
        'the writer was not disturbed',
      );
      await writer.release();
      assert.deepEqual(
        (await db.logRows('loan:5')).map((r) => [r.mode, r.status]),
        [
          ['read', 'EXPIRED'],
          ['write', 'RELEASED'],
        ],
      );
    } finally {
      worker.signal('SIGCONT');
      await worker.close();
    }
  });
});
