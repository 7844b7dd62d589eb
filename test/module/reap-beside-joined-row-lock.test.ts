import 'reflect-metadata';
/**
 * The janitor's reap beside a row-lock joined into a lease call's fenced transaction, on a key used
 * for the first time.
 *
 * operations.md: the janitor "deletes lock-table rows idle for janitor.idleKeyMs ..., skipping any
 * row someone has locked right now (a row-lock holder's key is in use: the janitor never waits on a
 * holder)", and a reaped key "keeps growing fencing tokens when it comes back ... (tokens jump,
 * never go back)". Expected on both servers: the run returns at once without an error, completes
 * and reaps the other idle keys, a brand-new key is granted meanwhile without waiting on the
 * janitor, and the joined key's token starts above every token reaped before.
 *
 * A joined take cannot roll back; its key row is created before the take, in a committed statement
 * of its own, so the caller's transaction holds no lock on the fencing floor row, which the reap
 * takes exclusively. (Created inside that transaction, the row's creation would keep the floor's
 * shared lock to the transaction's end, and the reap would skip the floor and reap nothing
 * meanwhile: on PostgreSQL it did, before the creation went apart there too.)
 */
import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import type { INestApplicationContext } from '@nestjs/common';
import { contractSuite } from '../support/contract-targets.js';
import { createLockApp } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';
import type { JanitorReport, LockService } from '../../lib/index.js';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

contractSuite('lease-janitor', 'reap beside a joined row-lock on a first-used key', { postgres: true }, (target) => {
  let db: TestDatabase;
  let app: INestApplicationContext;
  let locks: LockService;

  before(async () => {
    db = await TestDatabase.forTarget(target);
    ({ app, locks } = await createLockApp(
      db.settings,
      target.options({
        leaseMs: 10_000,
        janitor: { intervalMs: 3_600_000, idleKeyMs: 200, batchSize: 1000, logRetentionMs: 24 * 3_600_000 },
      }),
    ));
  });
  after(async () => {
    await app?.close();
    await db?.drop();
  });

  it(
    'a joined row-lock on a first-used key does not stop the janitor from reaping idle keys, nor hold up first grants of other keys',
    { timeout: 30_000 },
    async () => {
      const { ago, keyText } = db.sql;
      // An earlier reap: the fencing floor row exists from then on, at token 7.
      await db.query(`INSERT INTO db_lock (lock_key, fencing_token, last_granted_at) VALUES ('pre:1', 7, ${ago(3_600_000)})`);
      const first = await locks.runJanitor();
      assert.equal(first.reapedKeys, 1);
      await db.query(
        `INSERT INTO db_lock (lock_key, fencing_token, last_granted_at) VALUES ` +
          [1, 2, 3, 4, 5].map((n) => `('idle:${n}', ${n}, ${ago(3_600_000)})`).join(', '),
      );
      let entered!: () => void;
      const inside = new Promise<void>((r) => (entered = r));
      let joinedToken: number | undefined;
      const call = locks.runLocked('outer:lease', () =>
        locks.runLocked(
          'joined:fresh',
          async (lock) => {
            joinedToken = lock.fencingToken;
            entered();
            await sleep(3_500);
          },
          { strategy: 'row-lock' },
        ),
      );
      await inside;
      const startedAt = performance.now();
      const janitor = locks.runJanitor().then(
        (r: JanitorReport) => ({
          report: r as JanitorReport | undefined,
          error: undefined as string | undefined,
          ms: Math.round(performance.now() - startedAt),
        }),
        (e: Error) => ({ report: undefined, error: `${e.name}: ${e.message}`, ms: Math.round(performance.now() - startedAt) }),
      );
      await sleep(100);
      const t0 = performance.now();
      let fresh: string;
      try {
        const l = await locks.acquire('another:fresh', { timeoutMs: 600 });
        await l.release();
        fresh = `granted in ${Math.round(performance.now() - t0)} ms`;
      } catch (e) {
        fresh = `${(e as Error).name} after ${Math.round(performance.now() - t0)} ms`;
      }
      const outcome = await janitor;
      await call;
      const diag = `janitor run beside the joined row-lock holder: ${JSON.stringify(outcome)}; a first grant of another key meanwhile: ${fresh}`;
      // Never waits on the holder, never a raw error, on either server.
      assert.ok(outcome.error === undefined && outcome.report?.ran === true && outcome.ms < 1_500, diag);
      // The holder's transaction holds nothing of the floor: the run completes at once and reaps the idle keys.
      assert.ok(outcome.report!.complete === true && outcome.report!.reapedKeys === 5, diag);
      assert.match(fresh, /^granted in \d+ ms$/, `a first grant of another key while the janitor ran: ${fresh}`);
      // The joined key's row was created from the floor the first reap raised: its token does not go back.
      assert.ok(joinedToken !== undefined && joinedToken > 7, `the joined key's first token: ${joinedToken} (a key with token 7 was reaped before)`);
      const next = await locks.runJanitor();
      const left = await db.query<{ k: string }[]>(`SELECT ${keyText('lock_key')} AS k FROM db_lock WHERE lock_key LIKE 'idle:%'`);
      assert.ok(next.complete && left.length === 0, `the next run: ${JSON.stringify(next)}; idle keys left: ${left.map((r) => r.k).join(',')}`);
    },
  );
});
