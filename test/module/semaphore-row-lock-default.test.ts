import 'reflect-metadata';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Injectable, type INestApplicationContext } from '@nestjs/common';
import { TestDatabase } from '../support/test-database.js';
import { createLockApp } from '../support/lock-app.js';
import { DbLockOptionsError, LockLostError, LockService, Semaphore } from '../../lib/index.js';
import { stall } from '../support/lock-internals.js';

/**
 * README "strategy can only be 'lease'" / "No row-lock semaphores". With the
 * module's default strategy 'row-lock', semaphore calls still work as lease permits (fenced
 * `@Semaphore` included: a stalled holder's commit is refused after a takeover); naming 'row-lock'
 * on a semaphore call is a DbLockOptionsError before any SQL.
 */
let service: RowLockModuleService;

@Injectable()
class RowLockModuleService {
  constructor(readonly locks: LockService) {
    service = this;
  }

  @Semaphore('rl-sem:{0}', 2, { leaseMs: 400 })
  async write(id: number, stallIt: boolean, stalled: () => void, proceed: Promise<void>): Promise<number> {
    if (stallIt) {
      await stall(this.locks, this.locks.currentLock!);
      stalled();
      await proceed;
    }
    await this.locks.manager.query('INSERT INTO rl_sem_writes (id, token) VALUES (?, ?)', [id, this.locks.currentLock!.fencingToken]);
    return this.locks.currentLock!.fencingToken;
  }
}

describe("semaphores in a module whose default strategy is 'row-lock'", () => {
  let db: TestDatabase;
  let app: INestApplicationContext;
  let peerApp: INestApplicationContext;
  let peer: LockService;
  let locks: LockService;
  before(async () => {
    db = await TestDatabase.create();
    await db.query('CREATE TABLE rl_sem_writes (id INT PRIMARY KEY, token BIGINT NOT NULL) ENGINE=InnoDB');
    ({ app: peerApp, locks: peer } = await createLockApp(db.settings, { janitor: false, strategy: 'row-lock' }));
    ({ app, locks } = await createLockApp(db.settings, { janitor: false, strategy: 'row-lock' }, { providers: [RowLockModuleService] }));
  });
  after(async () => {
    await app?.close();
    await peerApp?.close();
    await db?.drop();
  });

  it("strategy 'row-lock' named on a semaphore call: DbLockOptionsError, nothing written", async () => {
    await assert.rejects(locks.acquireSemaphore('named-rl', 2, { strategy: 'row-lock' }), DbLockOptionsError);
    await assert.rejects(
      locks.withSemaphore('named-rl', 2, () => 1, { strategy: 'row-lock' }),
      DbLockOptionsError,
    );
    await assert.rejects(
      locks.runSemaphore('named-rl', 2, () => 1, { strategy: 'row-lock' }),
      DbLockOptionsError,
    );
    assert.throws(() => Semaphore('named-rl', 2, { strategy: 'row-lock' }), DbLockOptionsError);
    assert.deepEqual(await db.logRows('named-rl'), []);
  });

  it('a permit under the row-lock default is a lease permit: 2 at once, a third waits, log rows say lease/permit', async () => {
    const p1 = await locks.acquireSemaphore('rl-default', 2);
    const p2 = await peer.acquireSemaphore('rl-default', 2);
    await assert.rejects(locks.acquireSemaphore('rl-default', 2, { timeoutMs: 0 }), { name: 'LockTimeoutError' });
    const info = await locks.inspect('rl-default');
    assert.deepEqual(
      info.holders.map((h) => [h.mode, h.strategy]),
      [
        ['permit', 'lease'],
        ['permit', 'lease'],
      ],
    );
    await p1.release();
    await p2.release();
    const rows = await db.logRows('rl-default');
    assert.deepEqual(
      rows.map((r) => [r.mode, r.strategy, r.status]),
      [
        ['permit', 'lease', 'RELEASED'],
        ['permit', 'lease', 'RELEASED'],
      ],
    );
  });

  it("@Semaphore under the row-lock default: fenced; a stalled holder's commit refused after a takeover, nothing of it written", async () => {
    let stalled!: () => void;
    const isStalled = new Promise<void>((r) => (stalled = r));
    let proceed!: () => void;
    const call = service.write(1, true, stalled, new Promise<void>((r) => (proceed = r))).catch((e: unknown) => e);
    await isStalled;
    const p1 = await peer.acquireSemaphore('rl-sem:1', 2, { timeoutMs: 10_000 });
    const p2 = await peer.acquireSemaphore('rl-sem:1', 2, { timeoutMs: 10_000 });
    proceed();
    const error = await call;
    await p1.release();
    await p2.release();
    assert.ok(error instanceof LockLostError, `expected LockLostError, got ${String(error)}`);
    assert.deepEqual(await db.query('SELECT * FROM rl_sem_writes WHERE id = 1'), [], 'the stalled holder wrote nothing');
    const token = await service.write(2, false, () => undefined, Promise.resolve());
    assert.ok(token > 0);
    assert.equal((await db.query<{ n: number }[]>('SELECT COUNT(*) AS n FROM rl_sem_writes WHERE id = 2'))[0]!.n, 1);
  });
});
