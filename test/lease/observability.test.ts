import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { type INestApplicationContext, type LoggerService, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { typeOrmRoot } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';
import { rawSession } from '../support/raw-session.js';
import { DbLockModule, type LockEvent, LockService, type LockHandle } from '../../lib/index.js';
import { acquisitionIdOf, processIdOf, stall } from '../support/lock-internals.js';
import { contractSuite } from '../support/contract-targets.js';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** A Nest logger that keeps what it is given. */
class CapturingLogger implements LoggerService {
  readonly warnings: string[] = [];
  log(): void {}
  error(): void {}
  debug(): void {}
  verbose(): void {}
  warn(message: unknown, context?: string): void {
    this.warnings.push(`${context ?? ''}: ${String(message)}`);
  }
}

async function eventually(check: () => boolean, ms: number, what: string): Promise<void> {
  const deadline = performance.now() + ms;
  while (!check()) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

contractSuite('observability', 'observability: slow warnings through Nest Logger, event hook, stats', { postgres: true }, (target) => {
  let db: TestDatabase;
  let app: INestApplicationContext;
  let locks: LockService;
  const logger = new CapturingLogger();
  const events: LockEvent[] = [];
  before(async () => {
    db = await TestDatabase.forTarget(target);
    @Module({
      imports: [
        typeOrmRoot(db.settings),
        DbLockModule.forRoot(
          target.options({ slowThresholdMs: 200, leaseMs: 600, renewIntervalMs: 150, janitor: false, onEvent: (e) => events.push(e) }),
        ),
      ],
    })
    class ObservedModule {}
    app = await NestFactory.createApplicationContext(ObservedModule, { logger });
    await app.init();
    locks = app.get(LockService);
  });
  after(async () => {
    await app?.close();
    await db?.drop();
  });

  it('warns when waiting, holding or releasing takes longer than slowThresholdMs', async () => {
    const first = await locks.acquire('slow');
    const second = locks.acquire('slow', { timeoutMs: 5000 });
    await sleep(300);
    await first.release(); // held ~300 ms
    const held = await second; // waited ~300 ms
    await sleep(250);
    // Releasing: another connection holds the log row, so the release statement waits ~300 ms.
    const admin = await rawSession(db.settings);
    try {
      await admin.begin();
      await admin.query('SELECT id FROM db_lock_log WHERE owner = ? FOR UPDATE', [acquisitionIdOf(held)]);
      const releasing = held.release();
      await sleep(300);
      await admin.commit();
      await releasing;
    } finally {
      await admin.end();
    }
    const warned = (pattern: RegExp): boolean => logger.warnings.some((w) => w.startsWith('DbLock: ') && pattern.test(w));
    assert.ok(warned(/Waited \d+ ms for write lock on 'slow'/), logger.warnings.join('\n'));
    assert.ok(warned(/write lock on 'slow' was held for \d+ ms/), logger.warnings.join('\n'));
    assert.ok(warned(/Releasing write lock on 'slow' took \d+ ms/), logger.warnings.join('\n'));
  });

  it('emits acquired, released, renewed, timed-out, renewal-failed, lost and reclaimed; stats() agree', async () => {
    events.length = 0;
    const before = locks.stats();
    const kept = await locks.acquire('ev');
    assert.equal(await locks.tryAcquire('ev'), null); // timed-out
    await eventually(() => events.some((e) => e.type === 'renewed'), 5000, 'a renewal');
    await kept.release();

    // Renewals of this process's lease block on a row lock until the lease of 'stalled' runs out:
    // its signal aborts (lost) at its local deadline, the renewal fails after its one-second bound.
    const stalled: LockHandle = await locks.acquire('stalled');
    const admin = await rawSession(db.settings);
    try {
      await admin.begin();
      await admin.query('SELECT id FROM db_lock_process WHERE id = ? FOR UPDATE', [processIdOf(locks)]);
      await eventually(() => stalled.signal.aborted, 5000, 'the stalled lock to be lost');
      await eventually(() => events.some((e) => e.type === 'renewal-failed'), 5000, 'the blocked renewal to fail');
      await admin.rollback();
    } finally {
      await admin.end();
    }
    // Given up by its holder (its rows ended at once): the key is free, its release reports the loss.
    const next = await locks.acquire('stalled', { timeoutMs: 2000 });
    await assert.rejects(stalled.release(), { name: 'LockLostError' });
    await next.release();

    // A frozen holder (nothing renews it, nothing gives it back): the next grant takes it over (reclaimed).
    const frozen = await locks.acquire('frozen', { leaseMs: 200 });
    await stall(locks, frozen);
    const taker = await locks.acquire('frozen', { timeoutMs: 2000 });
    await assert.rejects(frozen.release(), { name: 'LockLostError' });
    await taker.release();

    const types = new Set(events.map((e) => e.type));
    for (const type of ['acquired', 'released', 'renewed', 'timed-out', 'renewal-failed', 'lost', 'reclaimed'] as const)
      assert.ok(types.has(type), `event '${type}' was emitted (${[...types].join(', ')})`);
    const lost = events.find((e) => e.type === 'lost')!;
    assert.deepEqual(lost.keys, ['stalled']);
    assert.equal(lost.fencingToken, stalled.fencingToken);
    assert.equal((lost.error as Error).name, 'LockLostError');
    const reclaimed = events.find((e) => e.type === 'reclaimed')!;
    assert.deepEqual([reclaimed.keys, reclaimed.count], [['frozen'], 1]);

    const after = locks.stats();
    const count = (type: string): number => events.filter((e) => e.type === type).length;
    assert.equal(after.acquired - before.acquired, count('acquired'));
    assert.equal(after.released - before.released, count('released'));
    assert.equal(after.timedOut - before.timedOut, count('timed-out'));
    assert.equal(after.lost - before.lost, count('lost'));
    assert.equal(after.renewalFailures - before.renewalFailures, count('renewal-failed'));
    assert.equal(after.reclaimed - before.reclaimed, 1);
    assert.ok(after.renewals - before.renewals >= count('renewed'));
    assert.equal(after.renewal.count, after.renewals, 'one duration sample per renewal statement');
    assert.equal(after.wait.count, after.acquired);
    assert.equal(after.hold.count, after.released);
    assert.equal(after.held, 0);
    assert.equal(after.waiting, 0);
    assert.ok(logger.warnings.some((w) => /Lease renewal of 1 lock\(s\) failed/.test(w)));
  });
});
