import 'reflect-metadata';
import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import type { LockService } from '../../lib/index.js';
import type { FenceStore, LockLogStore } from '../../lib/store/lock-store.js';
import { createLockApp } from '../support/lock-app.js';
import { partsOf } from '../support/lock-internals.js';
import { TestDatabase } from '../support/test-database.js';
import { contractSuite } from '../support/contract-targets.js';

/**
 * A decorated lease call ('requires-new') needs a grant and a business transaction. The grant goes
 * on the wire first, and the transaction's BEGIN follows while the grant is on its way: sent
 * before it, the BEGIN's round trip would delay the grant (it did on PostgreSQL, whose pool hands
 * out connections a tick later); sent after its answer, the BEGIN would add a round trip to every
 * call. A call whose key is held opens its transaction only once it is granted: a connection is
 * never held while waiting.
 */
contractSuite('lease-mechanics', 'a decorated call opens its business transaction while its grant is on the wire', { postgres: true }, (target) => {
  let db: TestDatabase;
  let app: INestApplicationContext;
  let other: INestApplicationContext;
  let locks: LockService;
  let theirs: LockService;
  /** What happened, in order, since the last call. */
  const events: string[] = [];
  const taken = () => events.splice(0);

  before(async () => {
    db = await TestDatabase.forTarget(target);
    ({ app, locks } = await createLockApp(db.settings, target.options({ janitor: false })));
    ({ app: other, locks: theirs } = await createLockApp(db.settings, target.options({ janitor: false })));
    const parts = partsOf(locks);
    const log = parts.store.log as { -readonly [K in keyof LockLogStore]: LockLogStore[K] };
    const grant = log.grant.bind(log);
    log.grant = (request, deadline, options) => {
      const answer = grant({ ...request, onSent: () => (events.push('grant sent'), request.onSent?.()) }, deadline, options);
      answer.then(
        (outcome) => events.push(outcome.granted ? 'granted' : 'refused'),
        () => events.push('grant failed'),
      );
      return answer;
    };
    const fence = parts.store.fence as { -readonly [K in keyof FenceStore]: FenceStore[K] };
    const begin = fence.begin.bind(fence);
    fence.begin = (runner, isolationLevel) => (events.push('begin'), begin(runner, isolationLevel));
  });
  after(async () => {
    await app?.close();
    await other?.close();
    await db?.drop();
  });

  it('a free key: the grant is sent, then BEGIN, then the grant is answered', async () => {
    await locks.runLocked('early:warm', () => undefined); // the DataSource's connection is open
    taken();
    for (let i = 0; i < 5; i++) {
      await locks.runLocked('early:free', () => undefined);
      assert.deepEqual(taken(), ['grant sent', 'begin', 'granted'], `call ${i}`);
    }
  });

  it('a held key: the transaction opens after the grant, never held while the call waits', async () => {
    const held = await theirs.acquire('early:held');
    taken();
    const call = locks.runLocked('early:held', () => undefined, { timeoutMs: 10_000 });
    setTimeout(() => void held.release(), 300);
    await call;
    const seen = taken();
    // The first try may have opened one before its refusal came (it is rolled back then).
    const afterRefusal = seen.slice(seen.indexOf('refused') + 1);
    assert.ok(seen.includes('refused'), `the first try was refused: ${seen.join(', ')}`);
    assert.deepEqual(
      afterRefusal.filter((e) => e === 'granted' || e === 'begin'),
      ['granted', 'begin'],
      seen.join(', '),
    );
  });
});
