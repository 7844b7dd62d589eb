import 'reflect-metadata';
import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { TestDatabase } from '../support/test-database.js';
import { LockWorker } from '../support/worker-host.js';
import { WORKER_HANDLES } from '../support/worker-handles.js';
import { contractSuite } from '../support/contract-targets.js';

/**
 * A frozen (SIGSTOP) process that was only *waiting* for a key must not keep the free key from
 * every other process: B holds the key, C's writer waits for it (C takes the key's doorbell), C is
 * stopped, B releases. The key is free (no live row); D's writer, with a 5 s budget (more than twice
 * the 2 s lease), must get it.
 */
if (!process.env.DB_LOCK_WORKER) {
  contractSuite('lease-mechanics', 'a stopped waiter does not keep a free key from every other writer', { postgres: true }, (target) => {
    let db: TestDatabase;
    let workers: LockWorker[] = [];
    before(async () => {
      db = await TestDatabase.forTarget(target);
      workers = await LockWorker.startMany(3, { settings: db.settings, options: target.options({ leaseMs: 2_000, janitor: false }) });
    });
    after(async () => {
      for (const w of workers) w.signal('SIGCONT');
      await Promise.all(workers.map((w) => w.close()));
      await db?.drop();
    });

    it('D gets the free key within its 5 s budget while C (a waiter) is stopped', async () => {
      const key = 'stopped-waiter';
      const [b, c, d] = workers as [LockWorker, LockWorker, LockWorker];
      const run = (w: LockWorker, fn: string, args: unknown) => w.run<number | string>(WORKER_HANDLES, fn, args);
      assert.equal(typeof (await run(b, 'take', { key, mode: 'write', timeoutMs: 2_000, name: 'b1' })), 'number');
      void run(c, 'take', { key, mode: 'write', timeoutMs: 30_000, name: 'c1' }).catch(() => undefined); // refused, waits on the bell
      await sleep(500);
      c.signal('SIGSTOP');
      await sleep(100);
      assert.equal(await run(b, 'drop', { name: 'b1' }), 'ok');
      const live = await db.query<{ n: number }[]>(`SELECT COUNT(*) AS n FROM db_lock_log WHERE status IN ('ACQUIRED','COMPLETED')`);
      const started = performance.now();
      const got = await run(d, 'take', { key, mode: 'write', timeoutMs: 5_000, name: 'd1' });
      const took = Math.round(performance.now() - started);
      if (typeof got === 'number') await run(d, 'drop', { name: 'd1' });
      // Control: a multi-key writer (no doorbell) of the same key, one try, is granted at once: the key is free.
      const multi = await run(b, 'take', { key: [key, 'other'], mode: 'write', timeoutMs: 0, name: 'b2' });
      if (typeof multi === 'number') await run(b, 'drop', { name: 'b2' });
      c.signal('SIGCONT');
      assert.equal(
        typeof got,
        'number',
        `D got ${got} after ${took} ms; live rows when D asked: ${Number(live[0]!.n)}; a multi-key writer of B right after, one try: ${typeof multi === 'number' ? 'granted' : multi}`,
      );
    });
  });
}
