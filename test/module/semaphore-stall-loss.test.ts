import 'reflect-metadata';
import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import { TestDatabase } from '../support/test-database.js';
import { createLockApp } from '../support/lock-app.js';
import { LockLostError, type LockHandle, type LockService } from '../../lib/index.js';
import { stall } from '../support/lock-internals.js';
import { contractSuite } from '../support/contract-targets.js';

/**
 * README "What signal promises": after the process itself stalled, reading
 * `signal.aborted` or calling `signal.throwIfAborted()` checks the lease deadline first. For every
 * kind of permit handle: acquireSemaphore's, withSemaphore's, a reentrant one, runSemaphore's
 * currentLock; then release() says LockLostError only if the permit was really taken over.
 */
function blockFor(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    /* the event loop is blocked: no renewal, no timer */
  }
}

contractSuite('semaphore-calls', 'a permit holder whose event loop stalled past its lease', { postgres: true }, (target) => {
  let db: TestDatabase;
  let app: INestApplicationContext;
  let locks: LockService;
  let peerApp: INestApplicationContext;
  let peer: LockService;
  before(async () => {
    db = await TestDatabase.forTarget(target);
    ({ app: peerApp, locks: peer } = await createLockApp(db.settings, target.options({ janitor: false, leaseMs: 5_000 })));
    ({ app, locks } = await createLockApp(db.settings, target.options({ janitor: false, leaseMs: 5_000 })));
  });
  after(async () => {
    await app?.close();
    await peerApp?.close();
    await db?.drop();
  });

  const check = (what: string, handle: LockHandle) => {
    const aborted = handle.signal.aborted;
    let threw: unknown;
    try {
      handle.signal.throwIfAborted();
    } catch (error) {
      threw = error;
    }
    assert.equal(aborted, true, `${what}: signal.aborted read right after a 1.5 s stall of a 500 ms lease`);
    assert.ok(threw instanceof LockLostError, `${what}: throwIfAborted() threw ${String(threw)}`);
  };

  it('acquireSemaphore handle', async () => {
    const permit = await locks.acquireSemaphore('stall-a', 2, { leaseMs: 500 });
    blockFor(1_500);
    check('acquireSemaphore', permit);
    await permit.release().catch(() => undefined);
  });

  it('withSemaphore handle and a reentrant handle', async () => {
    await locks
      .withSemaphore(
        'stall-b',
        2,
        async (outer) => {
          await locks.withSemaphore('stall-b', 2, async (inner) => {
            blockFor(1_500);
            check('reentrant withSemaphore', inner);
            check('outer withSemaphore', outer);
          });
        },
        { leaseMs: 500 },
      )
      .catch((e: unknown) => {
        if (!(e instanceof LockLostError)) throw e;
      });
  });

  it("runSemaphore's currentLock (transaction none)", async () => {
    await locks
      .runSemaphore(
        'stall-c',
        2,
        async () => {
          blockFor(1_500);
          check('runSemaphore currentLock', locks.currentLock!);
        },
        { leaseMs: 500, transaction: 'none' },
      )
      .catch((e: unknown) => {
        if (!(e instanceof LockLostError)) throw e;
      });
  });

  it('a stale permit taken over: release() and extend() say LockLostError and leave the new holder untouched', async () => {
    const key = 'stale-permit';
    const stale = await locks.acquireSemaphore(key, 1, { leaseMs: 400 });
    await stall(locks, stale);
    const fresh = await peer.acquireSemaphore(key, 1, { timeoutMs: 10_000 });
    await assert.rejects(stale.extend(5_000), LockLostError, 'extend of a taken-over permit');
    await assert.rejects(stale.release(), LockLostError, 'release of a taken-over permit');
    const info = await peer.inspect(key);
    assert.deepEqual(
      info.holders.map((h) => h.fencingToken),
      [fresh.fencingToken],
      'the new holder is the only live one',
    );
    await assert.rejects(peer.acquireSemaphore(key, 1, { timeoutMs: 0 }), { name: 'LockTimeoutError' }, 'the key is still full');
    await fresh.release();
    const rows = await db.logRows(key);
    assert.deepEqual(rows.map((r) => r.status).sort(), ['EXPIRED', 'RELEASED']);
  });

  it('permits of limit 2 whose leases ran out (holders stalled): another limit is adopted by a takeover, not refused', async () => {
    const key = 'expired-limit';
    const s1 = await locks.acquireSemaphore(key, 2, { leaseMs: 400 });
    const s2 = await locks.acquireSemaphore(key, 2, { leaseMs: 400 });
    await stall(locks, s1);
    await stall(locks, s2);
    await new Promise((r) => setTimeout(r, 700));
    const before = peer.stats().reclaimed;
    const fresh = await peer.acquireSemaphore(key, 3, { timeoutMs: 0 }).then(
      (p) => p,
      (e: unknown) => e,
    );
    assert.ok(!(fresh instanceof Error), `limit 3 after the limit-2 permits expired: ${String(fresh)}`);
    const p = fresh as LockHandle & { limit: number };
    assert.equal(p.limit, 3);
    const more = [await peer.acquireSemaphore(key, 3, { timeoutMs: 0 }), await peer.acquireSemaphore(key, 3, { timeoutMs: 0 })];
    await assert.rejects(peer.acquireSemaphore(key, 3, { timeoutMs: 0 }), { name: 'LockTimeoutError' }, 'limit 3 reached');
    for (const h of [p, ...more]) await h.release();
    assert.equal(peer.stats().reclaimed - before, 2, 'both expired permits reclaimed');
    const rows = await db.logRows(key);
    assert.deepEqual(rows.map((r) => r.status).sort(), ['EXPIRED', 'EXPIRED', 'RELEASED', 'RELEASED', 'RELEASED']);
  });
});
