/**
 * The janitor beside a row-lock holder that holds its key longer than janitor.idleKeyMs.
 *
 * A row-lock hold has no live log row, so once its key's last_granted_at is older than idleKeyMs
 * the key is a reap candidate. A reap that waited on the holder's row lock would hold the fencing
 * floor row (which every new key row reads) and the other candidates' rows meanwhile.
 * Expected (README/operations: the janitor never waits on a holder; idle keys are reaped; a free
 * key is granted at once): the run completes and reaps the other idle keys, and grants of free
 * keys (an idle one, a brand-new one) are not held up by the janitor.
 *
 * The same on both servers: the holder's own acquire creates its key row in a committed statement
 * before its transaction takes the row, so the holder keeps no lock on the floor. On PostgreSQL the
 * reap takes the floor FOR UPDATE NOWAIT and the idle rows FOR UPDATE SKIP LOCKED, so the held row
 * is skipped and the others are reaped.
 */
import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import { contractSuite } from '../support/contract-targets.js';
import { createLockApp } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';
import type { JanitorReport, LockService } from '../../lib/index.js';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

contractSuite('lease-janitor', 'janitor beside a long row-lock hold', { postgres: true }, (target) => {
  let db: TestDatabase;
  let app: INestApplicationContext;
  let locks: LockService;

  before(async () => {
    db = await TestDatabase.forTarget(target);
    ({ app, locks } = await createLockApp(
      db.settings,
      target.options({
        leaseMs: 5_000,
        janitor: { intervalMs: 3_600_000, idleKeyMs: 200, batchSize: 1000, logRetentionMs: 24 * 3_600_000 },
      }),
    ));
  });
  after(async () => {
    await app?.close();
    await db?.drop();
  });

  it(
    'a long row-lock hold does not stop the janitor from reaping other idle keys, nor hold up grants of free keys',
    { timeout: 30_000 },
    async () => {
      const { ago, keyText } = db.sql;
      // Five idle key rows (no log rows, granted an hour ago), sorted before the held key.
      await db.query(
        `INSERT INTO db_lock (lock_key, fencing_token, last_granted_at) VALUES ` +
          [1, 2, 3, 4, 5].map((n) => `('idle:${n}', ${n}, ${ago(3_600_000)})`).join(', '),
      );
      const held = await locks.acquire('row:held', { strategy: 'row-lock', timeoutMs: 5_000 });
      try {
        await sleep(500); // longer than idleKeyMs: the held key's row is a reap candidate now

        const startedAt = performance.now();
        const janitor = locks.runJanitor().then(
          (r: JanitorReport) => ({ report: r, ms: Math.round(performance.now() - startedAt) }),
          (e: Error) => ({ error: `${e.name}: ${e.message}`, ms: Math.round(performance.now() - startedAt) }),
        );
        await sleep(100); // the janitor is in its reap by now
        const grantOf = async (key: string) => {
          const t0 = performance.now();
          try {
            const lock = await locks.acquire(key, { timeoutMs: 600 });
            const token = lock.fencingToken;
            await lock.release();
            return { key, ok: true, ms: Math.round(performance.now() - t0), token };
          } catch (e) {
            return { key, ok: false, ms: Math.round(performance.now() - t0), error: `${(e as Error).name}: ${(e as Error).message}` };
          }
        };
        const [idleGrant, freshGrant] = await Promise.all([grantOf('idle:1'), grantOf('fresh:1')]);
        const result = await janitor;
        const left = await db.query<{ k: string }[]>(
          `SELECT ${keyText('lock_key')} AS k FROM db_lock WHERE lock_key LIKE 'idle:%' ORDER BY lock_key`,
        );
        const heldRow = await db.query<{ k: string }[]>(`SELECT ${keyText('lock_key')} AS k FROM db_lock WHERE lock_key = 'row:held'`);
        const diag = JSON.stringify({ result, idleGrant, freshGrant, left: left.map((r) => r.k), heldRow: heldRow.length });
        assert.ok(!('error' in result), `the janitor run failed: ${diag}`);
        assert.ok(left.length <= 1, `idle keys were not reaped: ${diag}`);
        assert.ok(freshGrant.ok, `a brand-new key was not granted within 600 ms while the janitor ran: ${diag}`);
        assert.ok(idleGrant.ok, `a free idle key was not granted within 600 ms while the janitor ran: ${diag}`);
        // The held key is in use: its row is skipped, never reaped under its holder.
        assert.equal(heldRow.length, 1, `the row-lock holder's key row was reaped under it: ${diag}`);
        // idle:1 was granted either from its own row (token 1) or, reaped first, from the floor the reap raised to 5: never back.
        assert.ok(idleGrant.token! > 1, `idle:1's token went back: ${diag}`);
      } finally {
        await held.release().catch(() => undefined);
      }
    },
  );
});
