import 'reflect-metadata';
import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import { DbLockError, LockService, LockUpgradeError, WriteLock } from '../../lib/index.js';
import { createLockApp, endedStatuses } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';
import { contractSuite } from '../support/contract-targets.js';
import { BusinessError, createEntries, entriesOf, insert } from './scenarios/entries.js';
import { gate, InnerLease, InnerRow, Outer } from './scenarios/nested-services.js';

/**
 * Nested decorated calls across services, with mixed strategies, errors, 'skip' and concurrent
 * call chains in one process.
 */
contractSuite('fenced-decorators', 'nested decorated calls across services', { postgres: true }, (target) => {
  let db: TestDatabase;
  let app: INestApplicationContext;
  let locks: LockService;
  let outer: Outer;

  before(async () => {
    db = await TestDatabase.forTarget(target);
    await createEntries(db);
    ({ app, locks } = await createLockApp(db.settings, target.options({ janitor: false }), { providers: [Outer, InnerLease, InnerRow] }));
    outer = app.get(Outer);
  });
  after(async () => {
    await app?.close();
    await db?.drop();
  });

  const entries = (k: string): Promise<string[]> => entriesOf(db, k);
  const ended = (key: string): Promise<unknown[]> => endedStatuses(db, key);
  const free = async (key: string): Promise<boolean> => {
    const h = await locks.tryAcquire(key);
    if (!h) return false;
    await h.release();
    return true;
  };

  it('row-lock inside a lease fenced call joins it: both commit together, both RELEASED', async () => {
    assert.equal(await outer.leaseThenRow('a1'), true, 'same EntityManager');
    assert.deepEqual(await entries('a1'), ['outer-lease', 'inner-row']);
    assert.deepEqual(await ended('ol:a1'), ['RELEASED']);
    assert.deepEqual(await ended('nr:a1'), ['RELEASED']);
    assert.ok(await free('nr:a1'));
  });

  it('lease inside a row-lock fenced call joins it: both commit together, both RELEASED', async () => {
    assert.equal(await outer.rowThenLease('a2'), true, 'same EntityManager');
    assert.deepEqual(await entries('a2'), ['outer-row', 'inner-lease']);
    assert.deepEqual(await ended('or:a2'), ['RELEASED']);
    assert.deepEqual(await ended('nl:a2'), ['RELEASED']);
    assert.ok(await free('nl:a2'));
  });

  it('outer fails after a joined inner call: both rolled back, both FAILED, both keys free', async () => {
    await assert.rejects(outer.leaseThenRow('a3', { outerFails: true }), BusinessError);
    await assert.rejects(outer.rowThenLease('a4', { outerFails: true }), BusinessError);
    assert.deepEqual(await entries('a3'), []);
    assert.deepEqual(await entries('a4'), []);
    assert.deepEqual(await ended('ol:a3'), ['FAILED']);
    assert.deepEqual(await ended('nr:a3'), ['FAILED']);
    assert.deepEqual(await ended('or:a4'), ['FAILED']);
    assert.deepEqual(await ended('nl:a4'), ['FAILED']);
    assert.ok(await free('nr:a3'));
    assert.ok(await free('nl:a4'));
  });

  it('inner fails and propagates: everything rolled back, both FAILED', async () => {
    await assert.rejects(outer.leaseThenRow('a5', { innerFails: true }), BusinessError);
    await assert.rejects(outer.rowThenLease('a6', { innerFails: true }), BusinessError);
    assert.deepEqual(await entries('a5'), []);
    assert.deepEqual(await entries('a6'), []);
    assert.deepEqual(await ended('ol:a5'), ['FAILED']);
    assert.deepEqual(await ended('nr:a5'), ['FAILED']);
    assert.deepEqual(await ended('or:a6'), ['FAILED']);
    assert.deepEqual(await ended('nl:a6'), ['FAILED']);
  });

  it("nested onLocked 'skip' on a key another chain holds: resolves undefined, the outer call commits", async () => {
    const held = await locks.acquire('skipme:s1', { strategy: 'lease' });
    try {
      const started = performance.now();
      assert.equal(await outer.withSkip('s1'), undefined);
      assert.ok(performance.now() - started < 3_000, 'one try, no wait');
    } finally {
      await held.release();
    }
    assert.deepEqual(await entries('s1'), ['outer-skip']);
    assert.deepEqual(await ended('os:s1'), ['RELEASED']);
    assert.equal(await outer.withSkip('s2'), 'ran');
    assert.deepEqual(await entries('s2'), ['outer-skip', 'skippable']);
  });

  it('a reader in one chain and a writer in another chain of the same process: the writer waits, no LockUpgradeError', async () => {
    const inside = gate();
    let entered!: () => void;
    const readerIn = new Promise<void>((r) => (entered = r));
    const reading = outer.reader('c1', inside.wait, entered);
    await readerIn;
    const writing = outer.writer('c1');
    let writerDone = false;
    void writing.then(
      () => (writerDone = true),
      () => (writerDone = true),
    );
    await new Promise((r) => setTimeout(r, 200));
    assert.equal(writerDone, false, 'the writer waits for the reader of the other chain');
    inside.open();
    await reading;
    assert.equal(await writing, 'wrote');
  });

  it('read (lease) then write (row-lock) on one key in one chain: LockUpgradeError, nothing written', async () => {
    await assert.rejects(outer.readThenRowWrite('u1'), LockUpgradeError);
    assert.deepEqual(await entries('u1'), []);
    assert.ok(await free('up:u1'));
  });

  it('a method returning a plain value is locked and answered with a promise; a synchronous throw rolls back (FAILED)', async () => {
    const answer = outer.syncValue('v1');
    assert.ok(answer instanceof Promise);
    assert.equal(await answer, 'value:v1');
    assert.deepEqual(await ended('sync:v1'), ['RELEASED']);
    const thrown = outer.syncThrow('v2');
    assert.ok(thrown instanceof Promise, 'a rejection, not a synchronous throw');
    await assert.rejects(thrown, BusinessError);
    assert.deepEqual(await ended('sync:v2'), ['FAILED']);
    assert.ok(await free('sync:v2'));
  });

  it('lockService.manager used after the locked call ended (by a task the method started): a DbLockError, nothing written', async () => {
    let later!: Promise<unknown>;
    let release!: () => void;
    const wait = new Promise<void>((r) => (release = r));
    class Probe {
      constructor(readonly l: LockService) {}
      @WriteLock('late:{0}')
      async run(k: string): Promise<void> {
        await insert(this.l.manager, k, 'in');
        later = wait.then(async () => {
          try {
            await insert(this.l.manager, k, 'late');
            return 'written';
          } catch (error) {
            return error;
          }
        });
      }
    }
    const probe = new Probe(locks);
    await probe.run('late1');
    release();
    const got = await later;
    assert.deepEqual(await entries('late1'), ['in'], 'nothing written after the call ended');
    assert.ok(got instanceof DbLockError, `got ${(got as object)?.constructor?.name}: ${String(got)}`);
  });
});
