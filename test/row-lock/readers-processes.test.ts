import { after, before, it } from 'node:test';
import { contractSuite } from '../support/contract-targets.js';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import { LockTimeoutError, type LockService } from '../../lib/index.js';
import { createLockApp, eventually } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';
import { LockWorker } from '../support/worker-host.js';
import type { Outcome, TakeArgs } from './readers-scenarios.js';

const SCENARIO = new URL('./readers-scenarios.js', import.meta.url).href;
type App = { app: INestApplicationContext; locks: LockService };

contractSuite('read-write', 'processes', { postgres: true }, (target) => {
  if (target.strategy !== 'row-lock') return;
  let db: TestDatabase;
  let rowWorkers: LockWorker[] = [];
  let leaseWorker: LockWorker;
  let rowApp: App;
  let leaseApp: App;
  before(async () => {
    db = await TestDatabase.forTarget(target);
    rowWorkers = await LockWorker.startMany(3, { settings: db.settings, options: { strategy: 'row-lock', janitor: false } });
    leaseWorker = await LockWorker.start({ settings: db.settings, options: { strategy: 'lease', janitor: false, leaseMs: 1_500 } });
    rowApp = await createLockApp(db.settings, { strategy: 'row-lock', janitor: false });
    leaseApp = await createLockApp(db.settings, { strategy: 'lease', janitor: false });
  });
  after(async () => {
    for (const w of [...rowWorkers, leaseWorker]) {
      w?.signal('SIGCONT');
      await w?.close();
    }
    await rowApp?.app.close();
    await leaseApp?.app.close();
    await db?.drop();
  });

  const take = (w: LockWorker, args: TakeArgs): Promise<Outcome> => w.run<Outcome>(SCENARIO, 'take', args);
  const release = (w: LockWorker, id: string) => w.run<{ ok: boolean; error?: string; signalAborted: boolean }>(SCENARIO, 'release', { id });
  const rows = async (key: string) => (await db.logRows(key)).map((r) => [r.mode, r.status, Number(r.fencing_token)]);

  it('a SIGKILLed reader among readers while a writer waits: the writer waits for the live reader only; new readers held back', async () => {
    const [r1, r2, w] = rowWorkers as [LockWorker, LockWorker, LockWorker];
    const key = 'kill-reader';
    await rowApp.locks.withLock(key, async () => undefined);
    assert.equal((await take(r1, { id: 'a', keys: key, mode: 'read' })).ok, true);
    assert.equal((await take(r2, { id: 'a', keys: key, mode: 'read' })).ok, true);
    let writerDone = false;
    const writer = take(w, { id: 'w', keys: key, mode: 'write', timeoutMs: 20_000 }).finally(() => (writerDone = true));
    await eventually(async () => (await db.lockWaits()) > 0, 10_000, 'the writer waits in the server');
    const late = await rowApp.locks.acquire(key, { mode: 'read', timeoutMs: 300 }).catch((e: unknown) => e);
    assert.ok(late instanceof LockTimeoutError, `late reader: ${String(late)}`);
    await r1.kill();
    await new Promise((r) => setTimeout(r, 500));
    assert.equal(writerDone, false, 'the writer got in while a live reader held the key');
    const r2Released = await release(r2, 'a');
    assert.equal(r2Released.ok, true);
    const granted = await writer;
    assert.equal(granted.ok, true, granted.error);
    assert.equal(granted.fencingToken, 2);
    assert.equal((await release(w, 'w')).ok, true);
    assert.deepEqual(await rows(key), [
      ['write', 'RELEASED', 1],
      ['read', 'RELEASED', 1],
      ['write', 'RELEASED', 2],
    ]);
  });

  it('a SIGSTOPped reader: a writer times out typed within its budget; new readers share with it', async () => {
    const r1 = rowWorkers[1]!;
    const w = rowWorkers[2]!;
    const key = 'stop-reader';
    await rowApp.locks.withLock(key, async () => undefined);
    assert.equal((await take(r1, { id: 's', keys: key, mode: 'read' })).ok, true);
    r1.signal('SIGSTOP');
    try {
      const out = await take(w, { id: 'w2', keys: key, mode: 'write', timeoutMs: 800 });
      assert.equal(out.ok, false);
      assert.match(out.error!, /^LockTimeoutError/);
      assert.ok(out.waitedMs >= 790 && out.waitedMs < 800 + 700, `waited ${out.waitedMs}`);
      const reader = await rowApp.locks.acquire(key, { mode: 'read', timeoutMs: 500 });
      assert.equal(reader.fencingToken, 1);
      await reader.release();
      const zero = await take(w, {
        id: 'w3',
        keys: [
          { key, mode: 'write' },
          { key: 'stop-reader-2', mode: 'read' },
        ],
        timeoutMs: 0,
      });
      assert.equal(zero.ok, false);
      assert.match(zero.error!, /^LockTimeoutError/);
    } finally {
      r1.signal('SIGCONT');
    }
    assert.equal((await release(r1, 's')).ok, true);
    const free = await rowApp.locks.tryAcquire(['stop-reader', 'stop-reader-2']);
    assert.ok(free, 'both keys free afterwards');
    await free.release();
  });

  it('row-lock reader vs lease writer: excluded, typed timeouts, takeover after the lease ran out', async () => {
    const key = 'mixed-r';
    const lw = await take(leaseWorker, { id: 'l', keys: key, mode: 'write' });
    assert.equal(lw.ok, true);
    const t0 = performance.now();
    const e0 = await rowApp.locks.acquire(key, { mode: 'read', timeoutMs: 0 }).catch((e: unknown) => e);
    const d0 = performance.now() - t0;
    assert.ok(e0 instanceof LockTimeoutError, String(e0));
    assert.ok(d0 < 400, `timeoutMs 0 took ${d0}`);
    const t1 = performance.now();
    const e1 = await rowApp.locks.acquire(key, { mode: 'read', timeoutMs: 400 }).catch((e: unknown) => e);
    const d1 = performance.now() - t1;
    assert.ok(e1 instanceof LockTimeoutError, String(e1));
    assert.ok(d1 >= 399 && d1 < 400 + 500, `400 ms took ${d1}`);
    leaseWorker.signal('SIGSTOP');
    let reader;
    try {
      reader = await rowApp.locks.acquire(key, { mode: 'read', timeoutMs: 10_000 });
    } finally {
      leaseWorker.signal('SIGCONT');
    }
    // A reader's token is the last writer's. On MySQL a key a lease used gives the reader a claimed
    // token of its own (above the lease's); PostgreSQL's lease grants bump the key row itself, so
    // there the reader carries the token of the writer it took over.
    if (target.database === 'postgres') assert.equal(reader.fencingToken, lw.fencingToken, 'the reader carries the last writer token');
    else assert.ok(reader.fencingToken > lw.fencingToken!, `reader token ${reader.fencingToken} after lease token ${lw.fencingToken}`);
    const stale = await release(leaseWorker, 'l');
    assert.equal(stale.ok, false);
    assert.match(stale.error!, /^LockLostError/);
    await reader.release();
    const after = await rowApp.locks.acquire(key, { timeoutMs: 1_000 });
    assert.ok(after.fencingToken > reader.fencingToken);
    await after.release();
    const log = await rows(key);
    assert.deepEqual(log, [
      ['write', 'EXPIRED', lw.fencingToken],
      ['read', 'RELEASED', reader.fencingToken],
      ['write', 'RELEASED', after.fencingToken],
    ]);
  });

  it('lease callers vs a row-lock reader in another process: excluded, typed, free at once after a SIGKILL', async () => {
    const r = rowWorkers[2]!;
    const key = 'mixed-r2';
    await rowApp.locks.withLock(key, async () => undefined);
    assert.equal((await take(r, { id: 'x', keys: key, mode: 'read' })).ok, true);
    const t1 = performance.now();
    const e1 = await leaseApp.locks.acquire(key, { timeoutMs: 400 }).catch((e: unknown) => e);
    const d1 = performance.now() - t1;
    assert.ok(e1 instanceof LockTimeoutError, String(e1));
    assert.ok(d1 >= 399 && d1 < 400 + 500, `400 ms took ${d1}`);
    const e2 = await leaseApp.locks.acquire(key, { mode: 'read', timeoutMs: 0 }).catch((e: unknown) => e);
    assert.ok(e2 instanceof LockTimeoutError, String(e2));
    const waiting = leaseApp.locks.acquire(key, { timeoutMs: 10_000 });
    await new Promise((res) => setTimeout(res, 200));
    const killedAt = performance.now();
    await r.kill();
    const lock = await waiting;
    const after = performance.now() - killedAt;
    assert.ok(after < 3_000, `granted ${after} ms after the kill`);
    await lock.release();
    assert.deepEqual(await rows(key), [
      ['write', 'RELEASED', 1],
      ['write', 'RELEASED', 2],
    ]);
  });
});
