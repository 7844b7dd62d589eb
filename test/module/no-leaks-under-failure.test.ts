import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import type { INestApplicationContext } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { DbLockError, type DbLockModuleOptions, type LockService, LockTimeoutError } from '../../lib/index.js';
import { TestDatabase } from '../support/test-database.js';
import { createLockApp, eventually } from '../support/lock-app.js';
import { outcome } from '../support/settled.js';
import { assertIdle, checkedOutSessionIds, killSession, sessionCount, sessionIdSql, sessionIds } from '../support/server-sessions.js';
import { contractSuite } from '../support/contract-targets.js';

async function appWith(db: TestDatabase, options: DbLockModuleOptions, poolSize: number) {
  const { app, locks } = await createLockApp(db.settings, options, { poolSize });
  return { app, locks, dataSource: app.get(DataSource) };
}

contractSuite('bounded-wait', 'connections back to idle after failures', { postgres: true }, (target) => {
  let db: TestDatabase;
  let app: INestApplicationContext;
  let locks: LockService;
  let dataSource: DataSource;
  before(async () => {
    db = await TestDatabase.forTarget(target);
    ({ app, locks, dataSource } = await appWith(db, target.options({ janitor: false, escapedWrites: 'ignore' }), 4));
  });
  after(async () => {
    await app?.close();
    await db?.drop();
  });
  const idle = (what: string) => assertIdle(db, dataSource, locks, what);

  it('the work throws (withLock, runLocked)', async () => {
    for (let i = 0; i < 5; i++) {
      await assert.rejects(
        locks.withLock('throw', async () => {
          throw new Error('boom');
        }),
        /boom/,
      );
      await assert.rejects(
        locks.runLocked('throw', async () => {
          await locks.manager.query('SELECT 1');
          throw new Error('boom');
        }),
        /boom/,
      );
    }
    await idle('after throws');
  });

  it('the work connection is killed mid-work (runLocked), then the commit', async () => {
    const mid = await outcome(
      locks.runLocked('kill-mid', async () => {
        const [{ id }] = await locks.manager.query(sessionIdSql(db));
        await killSession(db, Number(id));
        await locks.manager.query('SELECT 1');
      }),
    );
    assert.ok(mid.error !== undefined, 'failed');
    const commit = await outcome(
      locks.runLocked('kill-commit', async () => {
        const [{ id }] = await locks.manager.query(sessionIdSql(db));
        await killSession(db, Number(id));
        await sleep(50);
      }),
    );
    assert.ok(commit.error instanceof DbLockError, `typed: ${String(commit.error)}`);
    await idle('after kills');
    const h = await locks.acquire(['kill-mid', 'kill-commit'], { timeoutMs: 2_000 });
    await h.release();
    await idle('after re-acquire');
  });

  it('withLock: the holder connection killed, then release; a waiter killed in the server', async () => {
    await outcome(
      locks.withLock('wk', async () => {
        for (const id of checkedOutSessionIds(dataSource)) await killSession(db, id);
        await sleep(100);
      }),
    );
    await idle('after withLock kill');
    // The waiter is another app's, so that it waits in the server (row-lock: its locking statement)
    // or polls it (lease), where the holder's own process would have kept it waiting locally. Every
    // session of the waiter's app is killed while it waits.
    const holder = await locks.acquire('wk', { timeoutMs: 2_000 });
    const holderSide = new Set(await sessionIds(db));
    const other = await appWith(db, target.options({ janitor: false, escapedWrites: 'ignore' }), 4);
    try {
      const waiter = outcome(other.locks.acquire('wk', { timeoutMs: 3_000 }));
      await sleep(300);
      const waiterSide = (await sessionIds(db)).filter((id) => !holderSide.has(id));
      assert.ok(waiterSide.length > 0, 'the waiter has sessions to kill (else this step proves nothing)');
      for (const id of waiterSide) await killSession(db, id).catch(() => undefined);
      await sleep(300);
      await holder.release();
      const w = await waiter;
      if (w.error === undefined) await (w.value as { release(): Promise<void> }).release();
      else assert.ok(w.error instanceof DbLockError, `typed: ${String(w.error)}`);
      await idle('after killed waiter (holder side)');
      await assertIdle(db, other.dataSource, other.locks, 'after killed waiter (waiter side)');
    } finally {
      await other.app.close();
    }
  });

  it('many waiters time out at once (sub-second), and timeoutMs 0 storms', async () => {
    const holder = await locks.acquire('storm', { timeoutMs: 2_000 });
    const started = performance.now();
    const waits = await Promise.all(Array.from({ length: 25 }, () => outcome(locks.acquire('storm', { timeoutMs: 300 }))));
    const tookMs = performance.now() - started;
    assert.ok(
      waits.every((w) => w.error instanceof LockTimeoutError),
      JSON.stringify(waits.map((w) => String(w.error))),
    );
    assert.ok(tookMs < 2_500, `took ${tookMs}`);
    const zeros = await Promise.all(
      Array.from({ length: 60 }, (_, i) => outcome(i % 2 ? locks.acquire('storm', { timeoutMs: 0 }) : locks.tryAcquire('storm'))),
    );
    assert.ok(zeros.every((w) => w.error instanceof LockTimeoutError || (w.error === undefined && w.value === null)));
    const runs = await Promise.all(Array.from({ length: 20 }, () => outcome(locks.runLocked('storm', () => 1, { timeoutMs: 0 }))));
    assert.ok(
      runs.every((w) => w.error instanceof LockTimeoutError),
      JSON.stringify(runs.map((w) => String(w.error))),
    );
    await holder.release();
    await idle('after storms');
  });

  it('nested withLock > runLocked > withLock, failing at each level', async () => {
    for (const failAt of [3, 2, 1]) {
      const out = await outcome(
        locks.withLock(`n1-${failAt}`, async () => {
          await locks.runLocked(`n2-${failAt}`, async () => {
            await locks.manager.query('SELECT 1');
            await locks.withLock(`n3-${failAt}`, async () => {
              if (failAt === 3) throw new Error('fail 3');
            });
            if (failAt === 2) throw new Error('fail 2');
          });
          if (failAt === 1) throw new Error('fail 1');
        }),
      );
      assert.ok(out.error instanceof Error && out.error.message.includes(`fail ${failAt}`), String(out.error));
      await idle(`nested fail at ${failAt}`);
      const h = await locks.acquire([`n1-${failAt}`, `n2-${failAt}`, `n3-${failAt}`], { timeoutMs: 2_000 });
      await h.release();
    }
    await idle('after nested');
  });

  it('release twice, concurrently, and inside withLock', async () => {
    const h = await locks.acquire('rel', { timeoutMs: 2_000 });
    await Promise.allSettled([h.release(), h.release()]);
    await h.release().catch(() => undefined);
    // lease: returns; row-lock: LockLostError 'already released before the commit' (either way nothing leaks)
    await outcome(
      locks.withLock('rel', async (lock) => {
        await lock.release();
      }),
    );
    const h2 = await locks.acquire('rel', { timeoutMs: 2_000 });
    await Promise.allSettled([h2.release(), sleep(0).then(() => h2.release())]);
    await idle('after double releases');
    const h3 = await locks.acquire('rel', { timeoutMs: 2_000 });
    await h3.release();
  });

  it('maxHoldMs passes while the work sleeps or awaits a statement', async () => {
    const bounded = await appWith(db, target.options({ janitor: false, escapedWrites: 'ignore', maxHoldMs: 300 }), 4);
    try {
      const a = await outcome(
        bounded.locks.runLocked('hold', async () => {
          await sleep(700);
        }),
      );
      const b = await outcome(
        bounded.locks.runLocked('hold', async () => {
          await bounded.locks.manager.query(db.type === 'postgres' ? 'SELECT pg_sleep(1)' : 'SELECT SLEEP(1)');
        }),
      );
      const c = await outcome(
        bounded.locks.withLock('hold', async () => {
          await sleep(700);
        }),
      );
      for (const o of [a, b, c]) assert.ok(o.error instanceof DbLockError, String(o.error));
      await assertIdle(db, bounded.dataSource, bounded.locks, 'after maxHoldMs');
    } finally {
      await bounded.app.close();
    }
  });

  it('the app holds its whole (small) pool while many locked calls come', async () => {
    const small = await appWith(db, target.options({ janitor: false, escapedWrites: 'ignore' }), 3);
    try {
      const runners = [];
      for (let i = 0; i < 3; i++) {
        const r = small.dataSource.createQueryRunner();
        await r.connect();
        await r.startTransaction();
        runners.push(r);
      }
      const started = performance.now();
      const calls = await Promise.all(
        Array.from({ length: 8 }, (_, i) =>
          outcome(
            i % 2
              ? small.locks.runLocked(`ex-${i % 3}`, () => 1, { timeoutMs: 300 })
              : small.locks.withLock(`ex-${i % 3}`, async () => 1, { timeoutMs: 300 }),
          ),
        ),
      );
      const tookMs = performance.now() - started;
      for (const c of calls) assert.ok(c.error instanceof LockTimeoutError || (c.error === undefined && c.value === 1), String(c.error));
      assert.ok(tookMs < 2_500, `took ${tookMs}`);
      for (const r of runners) {
        await r.rollbackTransaction();
        await r.release();
      }
      await assertIdle(db, small.dataSource, small.locks, 'after pool exhaustion');
      assert.equal(await small.locks.runLocked('ex-0', () => 2, { timeoutMs: 2_000 }), 2);
    } finally {
      await small.app.close();
    }
  });

  it('handles never released while the app closes; a waiter too', async () => {
    const other = await TestDatabase.forTarget(target);
    const closing = await appWith(other, target.options({ janitor: false }), 4);
    const h1 = await closing.locks.acquire('never-1');
    await closing.locks.acquire('never-2');
    const waiter = outcome(closing.locks.acquire('never-1', { timeoutMs: 10_000 }));
    await sleep(200);
    const started = performance.now();
    await closing.app.close();
    const tookMs = performance.now() - started;
    const w = await waiter;
    assert.ok(w.error !== undefined, 'the waiter failed');
    assert.ok(tookMs < 5_000, `close took ${tookMs}`);
    assert.ok(h1.signal.aborted, 'aborted');
    await eventually(async () => (await sessionCount(other)) === 0, 3_000, 'no session left after close');
    await other.drop();
  });
});
