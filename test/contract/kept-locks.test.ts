import 'reflect-metadata';
import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { type INestApplicationContext, Injectable } from '@nestjs/common';
import { LockLostError, LockService, WriteLock } from '../../lib/index.js';
import { createLockApp } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';
import { contractSuite } from '../support/contract-targets.js';
import { createEntries, entriesOf, insert } from './scenarios/entries.js';

/**
 * Fenced commit of a lock held by an outer call (a "kept" lock): a locked method whose key the call
 * chain already holds through an outer withLock() commits only while that outer lock is still the
 * chain's (README "Fenced commit"; forceRelease: "their fenced commits ... fail with LockLostError").
 * It holds when the method opens its own transaction; it must hold the same when the method joins
 * the fenced transaction of a call on another key in between.
 *
 * The loss is a forceRelease of the outer lock, after the method wrote and before its work commits.
 * No timing involved.
 */

@Injectable()
class NestedWrites {
  constructor(readonly locks: LockService) {}

  /** Writes under key A, then runs `then` before its work commits. */
  @WriteLock('kept:a:{0}')
  async writeA(n: number, then: () => Promise<void>): Promise<void> {
    await insert(this.locks.manager, `a${n}`, 'a');
    await then();
  }

  /** A call on another key (B) in between: nested calls join its fenced transaction. */
  @WriteLock('kept:b:{0}')
  async viaB(n: number, inside: () => Promise<void>): Promise<void> {
    await insert(this.locks.manager, `b${n}`, 'b');
    await inside();
  }
}

contractSuite('lease-takeover', 'a kept outer lock lost before the nested fenced commit', { postgres: true }, (target) => {
  let db: TestDatabase;
  let app: INestApplicationContext;
  let locks: LockService;
  let calls: NestedWrites;

  before(async () => {
    db = await TestDatabase.forTarget(target);
    await createEntries(db);
    ({ app, locks } = await createLockApp(db.settings, target.options({ janitor: false }), { providers: [NestedWrites] }));
    calls = app.get(NestedWrites);
  });
  after(async () => {
    await app?.close();
    await db?.drop();
  });

  const entries = (k: string): Promise<string[]> => entriesOf(db, k);

  /** Runs `inside` under withLock(key), the outer lock's own LockLostError at release swallowed; returns what `inside` threw. */
  async function underOuter(key: string, inside: () => Promise<void>): Promise<unknown> {
    let thrown: unknown;
    await locks
      .withLock(key, async () => {
        try {
          await inside();
        } catch (error) {
          thrown = error;
        }
      })
      .catch((error: unknown) => {
        if (!(error instanceof LockLostError)) throw error; // the evicted outer lock's release says so
      });
    return thrown;
  }

  it('control: the method opening its own transaction is refused (LockLostError, its write rolled back)', async () => {
    const thrown = await underOuter('kept:a:1', () => calls.writeA(1, async () => void (await locks.forceRelease('kept:a:1', 'evicted'))));
    assert.ok(thrown instanceof LockLostError, `LockLostError, got ${String(thrown)}`);
    assert.deepEqual(await entries('a1'), []);
  });

  it('the same method joined into a call on another key: its write must not commit once its lock was lost', async () => {
    const thrown = await underOuter('kept:a:2', () =>
      calls.viaB(2, () => calls.writeA(2, async () => void (await locks.forceRelease('kept:a:2', 'evicted')))),
    );
    const written = await entries('a2');
    assert.ok(
      thrown instanceof LockLostError,
      `LockLostError expected; the call resolved (${String(thrown)}) and committed a2=${JSON.stringify(written)}`,
    );
    assert.deepEqual(written, [], 'the write under the lost lock kept:a:2 was committed');
  });
});
