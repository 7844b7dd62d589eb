/**
 * The fencing counter inspect() reports after the janitor reaped a key row (row-lock and lease).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import { createLockApp } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';
import { LockWorker } from '../support/worker-host.js';
import type { WorkerContext } from '../support/lock-worker.js';
import type { LockService } from '../../lib/index.js';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const self = import.meta.url;

/** Acquires a lease lock and keeps it until killed; emits 'held'. */
export async function keepLease(ctx: WorkerContext<{ key: string; leaseMs: number }>): Promise<void> {
  const lock = await ctx.locks.acquire(ctx.args.key, { leaseMs: ctx.args.leaseMs, strategy: 'lease' });
  ctx.emit('held', { token: lock.fencingToken });
  await new Promise(() => undefined);
}

if (!process.env.DB_LOCK_WORKER) {
  describe('inspect(): the fencing counter after a reap', () => {
    let db: TestDatabase;
    let app: INestApplicationContext;
    let locks: LockService;
    const workers: LockWorker[] = [];
    const options = { namespace: 'hrl', strategy: 'row-lock' as const, janitor: { intervalMs: 3_600_000, idleKeyMs: 0 } };
    before(async () => {
      db = await TestDatabase.create();
      ({ app, locks } = await createLockApp(db.settings, options));
    });
    after(async () => {
      await Promise.all(workers.map((w) => w.kill()));
      await app?.close();
      await db?.drop();
    });

    it('inspect().fencingToken is the token of the latest grant, also after the janitor reaped the idle key row', async () => {
      let last = 0;
      for (let i = 0; i < 3; i++) last = await locks.withLock('tok', async (lock) => lock.fencingToken);
      assert.equal((await locks.inspect('tok')).fencingToken, last, 'before the reap');
      await sleep(20);
      const report = await locks.runJanitor();
      assert.ok(report.ran);
      const reaped = await db.query<{ n: number }[]>('SELECT COUNT(*) AS n FROM db_lock WHERE lock_key = ?', [Buffer.from('hrl:tok')]);
      const info = await locks.inspect('tok');
      const next = await locks.withLock('tok', async (lock) => lock.fencingToken);
      assert.ok(next > last, `tokens keep growing: ${next} after ${last}`);
      assert.equal(
        info.fencingToken,
        last,
        `inspect after the reap (key rows left: ${reaped[0]!.n}, reaped keys ${report.reapedKeys}): "the token of its latest grant (0 if never granted)"`,
      );
    });

    it('lease: inspect().fencingToken after a dead holder was reclaimed and its idle key row reaped', async () => {
      const worker = await LockWorker.start({ settings: db.settings, options: { namespace: 'hrl', janitor: false } });
      workers.push(worker);
      let held!: (t: number) => void;
      const isHeld = new Promise<number>((r) => (held = r));
      void worker
        .run(self, 'keepLease', { key: 'ltok', leaseMs: 300 }, (e, d) => e === 'held' && held((d as { token: number }).token))
        .catch(() => undefined);
      const token = await isHeld;
      assert.equal((await locks.inspect('ltok')).fencingToken, token, 'before');
      await worker.kill();
      await sleep(700);
      const report = await locks.runJanitor();
      const info = await locks.inspect('ltok');
      assert.equal(info.fencingToken, token, `after the janitor (reclaimed ${report.reclaimed}, reaped keys ${report.reapedKeys})`);
    });
  });
}
