import 'reflect-metadata';
import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import { LockLostError, LockService, LockTimeoutError, LockUpgradeError } from '../../lib/index.js';
import { createLockApp, endedStatuses } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';
import { contractSuite } from '../support/contract-targets.js';
import { createEntries, entriesOf } from './scenarios/entries.js';
import { JoinedLocks } from './scenarios/joined-locks.js';

/** Locks taken inside an open fenced transaction (joined): timeouts, losses, skips. */
contractSuite('fenced-decorators', 'locks joined into an open fenced transaction', { postgres: true }, (target) => {
  let db: TestDatabase;
  let app: INestApplicationContext;
  let locks: LockService;
  let svc: JoinedLocks;

  before(async () => {
    db = await TestDatabase.forTarget(target);
    await createEntries(db);
    ({ app, locks } = await createLockApp(db.settings, target.options({ janitor: false }), { providers: [JoinedLocks] }));
    svc = app.get(JoinedLocks);
  });
  after(async () => {
    await app?.close();
    await db?.drop();
  });

  const entries = (k: string): Promise<string[]> => entriesOf(db, k);
  const ended = (key: string): Promise<unknown[]> => endedStatuses(db, key);

  /** Holds `key` as a row-lock in another call chain until the returned release is called. */
  async function holdRowLock(key: string): Promise<() => Promise<void>> {
    let release!: () => void;
    const until = new Promise<void>((r) => (release = r));
    let entered!: () => void;
    const inside = new Promise<void>((r) => (entered = r));
    const done = locks.withLock(
      key,
      async () => {
        entered();
        await until;
      },
      { strategy: 'row-lock' },
    );
    await inside;
    return async () => {
      release();
      await done;
    };
  }

  it('a joined row-lock take that times out: LockTimeoutError to the outer, which goes on and commits', async () => {
    const release = await holdRowLock('jr:t1');
    let result: { innerError: unknown; innerResult: unknown };
    try {
      result = await svc.outerCatching('t1', () => svc.innerRow('t1'));
    } finally {
      await release();
    }
    assert.ok(result.innerError instanceof LockTimeoutError, `got ${String(result.innerError)}`);
    assert.deepEqual(await entries('t1'), ['outer-before', 'outer-after']);
    assert.deepEqual(await ended('jo:t1'), ['RELEASED']);
  });

  it("a joined row-lock 'skip' on a key a row-lock holder has: undefined at once, the outer commits", async () => {
    const release = await holdRowLock('jr:t2');
    let result: { innerError: unknown; innerResult: unknown };
    const started = performance.now();
    try {
      result = await svc.outerCatching('t2', () => svc.innerRowSkip('t2'));
    } finally {
      await release();
    }
    assert.equal(result.innerError, undefined, String(result.innerError));
    assert.equal(result.innerResult, undefined);
    assert.ok(performance.now() - started < 3_000);
    assert.deepEqual(await entries('t2'), ['outer-before', 'outer-after']);
    assert.deepEqual(await ended('jo:t2'), ['RELEASED']);
  });

  it('a lease lock joined into the outer transaction, lost before the outer commit: the outer is refused, all rolled back', async () => {
    const error = await svc
      .outerThen(
        't3',
        () => svc.innerLease('t3'),
        async () => {
          const [owner] = (await db.logRows('jl:t3')).map((r) => String(r.owner));
          await db.query(`UPDATE db_lock_log SET status = 'EXPIRED' WHERE owner = ? AND lock_key = ?`, [owner, Buffer.from('jl:t3')]);
        },
      )
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    assert.ok(error instanceof LockLostError, `got ${String(error)}`);
    assert.deepEqual(await entries('t3'), []);
  });

  it('two concurrent nested calls on one new key inside a fenced call: both run and commit, no wait for itself', async () => {
    const started = performance.now();
    const error = await svc.outerConcurrent('t4').then(
      () => undefined,
      (e: unknown) => e,
    );
    const elapsed = performance.now() - started;
    assert.equal(error, undefined, `the outer call failed after ${Math.round(elapsed)} ms: ${String(error)}`);
    assert.deepEqual((await entries('t4')).sort(), ['line-1', 'line-2', 'outer']);
    assert.ok(elapsed < 1_500, `took ${Math.round(elapsed)} ms (the nested timeout is 2000 ms)`);
  });

  it('the same nested call twice in a row on one new key inside a fenced call: the second does not wait for the first', async () => {
    const started = performance.now();
    const error = await svc.outerSequential('t5').then(
      () => undefined,
      (e: unknown) => e,
    );
    const elapsed = performance.now() - started;
    assert.equal(error, undefined, `the outer call failed after ${Math.round(elapsed)} ms: ${String(error)}`);
    assert.deepEqual(await entries('t5'), ['outer', 'first', 'second']);
    assert.ok(elapsed < 1_500, `took ${Math.round(elapsed)} ms (the nested timeout is 2000 ms)`);
  });

  it('a row-lock outer calling a lease-locked helper twice on one key: the second does not wait for the first', async () => {
    const started = performance.now();
    const error = await svc.rowOuterSequentialLease('t6').then(
      () => undefined,
      (e: unknown) => e,
    );
    const elapsed = performance.now() - started;
    assert.equal(error, undefined, `the outer call failed after ${Math.round(elapsed)} ms: ${String(error)}`);
    assert.deepEqual(await entries('t6'), ['outer', 'first', 'second']);
  });

  it('@Semaphore(limit 1) helper called twice inside a fenced call: the second does not wait for the first', async () => {
    const started = performance.now();
    const error = await svc.outerPermitTwice('t7').then(
      () => undefined,
      (e: unknown) => e,
    );
    assert.equal(error, undefined, `the outer call failed after ${Math.round(performance.now() - started)} ms: ${String(error)}`);
    assert.deepEqual(await entries('t7'), ['first', 'second']);
  });

  it('a read-locked helper then a write-locked helper on one key inside a fenced call: no wait for itself (LockUpgradeError at once, or the upgrade)', async () => {
    const started = performance.now();
    const error = await svc.outerReadThenWrite('t8').then(
      () => undefined,
      (e: unknown) => e,
    );
    const elapsed = performance.now() - started;
    assert.ok(error === undefined || error instanceof LockUpgradeError, `after ${Math.round(elapsed)} ms: ${String(error)}`);
    assert.ok(elapsed < 1_500, `took ${Math.round(elapsed)} ms`);
  });
});
