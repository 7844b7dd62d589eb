import 'reflect-metadata';
import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { Injectable, type INestApplicationContext } from '@nestjs/common';
import { TestDatabase } from '../support/test-database.js';
import { createLockApp } from '../support/lock-app.js';
import { LockService, Semaphore, SemaphoreLimitError, WriteLock } from '../../lib/index.js';
import { contractSuite } from '../support/contract-targets.js';

@Injectable()
class Svc {
  constructor(readonly locks: LockService) {}

  @Semaphore('hj:{0}', 1, { timeoutMs: 2_000 })
  async permitOne(k: string): Promise<number> {
    await this.locks.manager.query('SELECT 1');
    return this.locks.currentLock!.fencingToken;
  }

  @Semaphore('hs:{0}', 2, { onLocked: 'skip' })
  async skippingHelper(k: string): Promise<string | undefined> {
    await this.locks.manager.query('SELECT 1');
    return 'ran';
  }

  /** The skipping helper twice at once: the second finds the first's grant in flight. */
  @WriteLock('hso:{0}')
  async outerTwice(k: string): Promise<(string | undefined)[]> {
    return Promise.all([this.skippingHelper(k), this.skippingHelper(k)]);
  }

  /** A joined @Semaphore helper, then the key as a lock by hand: the chain holds it as a permit. */
  @WriteLock('hjl:{0}')
  async outerLock(k: string): Promise<{ error: unknown; waitedMs: number }> {
    await this.permitOne(k);
    const started = performance.now();
    const error = await this.locks.acquire(`hj:${k}`, { timeoutMs: 1_500 }).then(
      async (l) => {
        await l.release();
        return undefined;
      },
      (e: unknown) => e,
    );
    return { error, waitedMs: performance.now() - started };
  }

  /** A joined @Semaphore helper, then the same permit again by hand / with withSemaphore, inside one fenced call. */
  @WriteLock('hjo:{0}')
  async outer(
    k: string,
    how: 'withSemaphore' | 'acquireSemaphore',
  ): Promise<{ first: number; second: number; waitedMs: number; reentrant: boolean }> {
    const first = await this.permitOne(k);
    const started = performance.now();
    let second: number;
    let reentrant: boolean;
    if (how === 'withSemaphore') {
      [second, reentrant] = await this.locks.withSemaphore(`hj:${k}`, 1, (p) => [p.fencingToken, p.reentrant] as const, { timeoutMs: 1_500 });
    } else {
      const p = await this.locks.acquireSemaphore(`hj:${k}`, 1, { timeoutMs: 1_500 });
      second = p.fencingToken;
      reentrant = p.reentrant;
      await p.release();
    }
    return { first, second, waitedMs: performance.now() - started, reentrant };
  }
}

contractSuite(
  'semaphore-calls',
  'a permit taken by a joined @Semaphore helper, asked again in the same fenced call (by hand, or by the same helper at once)',
  { postgres: true },
  (target) => {
    let db: TestDatabase;
    let app: INestApplicationContext;
    before(async () => {
      db = await TestDatabase.forTarget(target);
      ({ app } = await createLockApp(db.settings, target.options({ janitor: false, leaseMs: 5_000 }), { providers: [Svc] }));
    });
    after(async () => {
      await app?.close();
      await db?.drop();
    });

    it('acquire() of the key as a lock after the joined permit: SemaphoreLimitError at once (README), not a wait for itself', async () => {
      const { error, waitedMs } = await app.get(Svc).outerLock('lock');
      assert.ok(error instanceof SemaphoreLimitError, `got ${String(error)} after ${Math.round(waitedMs)} ms`);
      assert.ok(waitedMs < 500, `after ${Math.round(waitedMs)} ms`);
    });

    for (const how of ['withSemaphore', 'acquireSemaphore'] as const) {
      it(`${how}: reused (the chain holds the permit until its commit), no wait for itself`, async () => {
        const started = performance.now();
        const result = await app
          .get(Svc)
          .outer(how, how)
          .then(
            (r) => r,
            (e: unknown) => e,
          );
        assert.ok(!(result instanceof Error), `${String(result)} after ${Math.round(performance.now() - started)} ms`);
        const r = result as { first: number; second: number; waitedMs: number; reentrant: boolean };
        assert.equal(r.second, r.first);
        assert.equal(r.reentrant, true);
        assert.ok(r.waitedMs < 500, `waited ${Math.round(r.waitedMs)} ms`);
      });
    }

    it("an onLocked 'skip' helper called twice at once: both run (a free semaphore of 2; the second reuses the first's permit or takes its own), none skipped", async () => {
      assert.deepEqual(await app.get(Svc).outerTwice('a'), ['ran', 'ran']);
    });
  },
);
