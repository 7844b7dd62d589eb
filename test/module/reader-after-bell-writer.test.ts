import 'reflect-metadata';
import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { TestDatabase } from '../support/test-database.js';
import { LockWorker } from '../support/worker-host.js';
import { WORKER_HANDLES } from '../support/worker-handles.js';
import { contractSuite } from '../support/contract-targets.js';

/**
 * Two processes, one key, default options (lease, doorbells, writerPreference on).
 * A's writer holds the key with its doorbell (it had waited for it); B's writer waits on that bell.
 * A releases (ringing the bell): B's writer is granted. A reader of process A then asks once: it
 * must be refused while B's writer holds the key (exclusion), not granted beside it.
 */
if (!process.env.DB_LOCK_WORKER) {
  contractSuite('lease-mechanics', 'a reader of the releasing process beside the writer its doorbell woke', { postgres: true }, (target) => {
    let db: TestDatabase;
    let workers: LockWorker[] = [];
    before(async () => {
      db = await TestDatabase.forTarget(target);
      workers = await LockWorker.startMany(2, { settings: db.settings, options: target.options({ leaseMs: 5_000, janitor: false }) });
    });
    after(async () => {
      await Promise.all(workers.map((w) => w.close()));
      await db?.drop();
    });

    for (let round = 0; round < 3; round++) {
      it(`round ${round}: A's reader is refused while B's writer holds the key`, async () => {
        const key = `bell-read-${round}`;
        const [a, b] = workers as [LockWorker, LockWorker];
        const run = (w: LockWorker, fn: string, args: unknown) => w.run<number | string>(WORKER_HANDLES, fn, args);
        assert.equal(typeof (await run(b, 'take', { key, mode: 'write', timeoutMs: 2_000, name: 'b1' })), 'number');
        const aWriter = run(a, 'take', { key, mode: 'write', timeoutMs: 5_000, name: 'a1' }); // refused, waits (takes the bell)
        await sleep(300);
        assert.equal(await run(b, 'drop', { name: 'b1' }), 'ok');
        const aToken = await aWriter; // A holds the key and its bell
        assert.equal(typeof aToken, 'number');
        const bWriter = run(b, 'take', { key, mode: 'write', timeoutMs: 5_000, name: 'b2' }); // waits on A's bell
        await sleep(400);
        assert.equal(await run(a, 'drop', { name: 'a1' }), 'ok'); // rings the bell: B is granted
        const bToken = await bWriter;
        assert.equal(typeof bToken, 'number');
        await sleep(1_100); // A's own refusals (step 2) are more than a second old: the reader's try goes at the fast shape
        const reader = await run(a, 'take', { key, mode: 'read', timeoutMs: 0, name: 'a2' });
        const rows = await db.logRows(key);
        const live = rows.filter((r) => r.status === 'ACQUIRED').map((r) => `${r.mode} token ${r.fencing_token}`);
        await run(a, 'drop', { name: 'a2' });
        await run(b, 'drop', { name: 'b2' });
        assert.equal(
          reader,
          'LockTimeoutError',
          `A's reader was granted (token ${reader}) while B's writer (token ${bToken}) holds the key; live rows: ${live.join(', ')}`,
        );
      });
    }
  });
}
