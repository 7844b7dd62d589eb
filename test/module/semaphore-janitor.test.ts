import 'reflect-metadata';
import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import type { INestApplicationContext } from '@nestjs/common';
import { TestDatabase } from '../support/test-database.js';
import { createLockApp } from '../support/lock-app.js';
import { SemaphoreLimitError, type LockService } from '../../lib/index.js';
import { contractSuite } from '../support/contract-targets.js';

/**
 * The janitor while permits are held past their own lease (renewed through the
 * process lease): it must not reclaim them, reap their key row, or reset the limit; after they are
 * released and the key row is reaped, the next permit's token is still above every earlier one.
 */
contractSuite('semaphore', 'the janitor beside held permits', { postgres: true }, (target) => {
  let db: TestDatabase;
  let a: INestApplicationContext;
  let b: INestApplicationContext;
  let la: LockService;
  let lb: LockService;
  before(async () => {
    db = await TestDatabase.forTarget(target);
    const janitor = { intervalMs: 3_600_000, logRetentionMs: 1, idleKeyMs: 1 };
    ({ app: a, locks: la } = await createLockApp(db.settings, target.options({ leaseMs: 5_000, janitor })));
    ({ app: b, locks: lb } = await createLockApp(db.settings, target.options({ leaseMs: 5_000, janitor })));
  });
  after(async () => {
    await a?.close();
    await b?.close();
    await db?.drop();
  });

  it('permits renewed past their own 1 s lease survive janitor runs; then tokens keep growing after the key row is reaped', async () => {
    const key = 'janitor-sem';
    const p1 = await la.acquireSemaphore(key, 2, { leaseMs: 1_000 });
    const p2 = await la.acquireSemaphore(key, 2, { leaseMs: 1_000 });
    await sleep(2_500);
    const run1 = await lb.runJanitor();
    await sleep(300);
    const run2 = await lb.runJanitor();
    assert.equal(run1.reclaimed + run2.reclaimed, 0, `the janitor reclaimed ${run1.reclaimed + run2.reclaimed} renewed permits`);
    assert.equal(p1.signal.aborted || p2.signal.aborted, false, 'a renewed permit lost its signal');
    const info = await lb.inspect(key);
    assert.equal(info.holders.length, 2, `inspect sees ${info.holders.length} holders`);
    await assert.rejects(lb.acquireSemaphore(key, 3, { timeoutMs: 0 }), SemaphoreLimitError, 'the limit is still 2');
    await assert.rejects(lb.acquireSemaphore(key, 2, { timeoutMs: 0 }), { name: 'LockTimeoutError' }, 'both permits still count');
    await p1.release();
    await p2.release();
    const last = Math.max(p1.fencingToken, p2.fencingToken);
    await sleep(20);
    const run3 = await lb.runJanitor();
    const keyRows = await db.query<{ n: number }[]>(`SELECT COUNT(*) AS n FROM db_lock WHERE lock_key = ?`, [key]);
    const p3 = await lb.acquireSemaphore(key, 5, { timeoutMs: 0 });
    await p3.release();
    assert.ok(
      p3.fencingToken > last,
      `token ${p3.fencingToken} after ${last} (key rows left by the janitor: ${keyRows[0]!.n}, reaped ${run3.reapedKeys})`,
    );
    assert.equal(p3.limit, 5);
  });
});
