import 'reflect-metadata';
import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { DataSource } from 'typeorm';
import { TestDatabase } from '../support/test-database.js';
import { LockWorker } from '../support/worker-host.js';
import type { WorkerContext } from '../support/lock-worker.js';
import { contractSuite } from '../support/contract-targets.js';
import { runSql } from '../support/portable-sql.js';

/**
 * A key used as a semaphore and as a lock (writers, readers) at the same time by
 * several processes. README: "A key is a lock or a semaphore, never both at once: lock callers
 * (readers too) wait while permits are live, and permit callers wait while a lock is held", and at
 * most `limit` permits at once. Writers go through the fast paths (known-free one-INSERT grant,
 * doorbells), permits through the semaphore plan: the in-table counters, kept under a row lock by
 * each entry/exit, must never show a writer beside anyone, a reader beside a permit, or more than
 * `limit` permits.
 */
const SELF = import.meta.url;
const TABLE = 'sem_mix';
const LIMIT = 2;
/** 1 where `condition` holds, else 0 (PostgreSQL adds no booleans to integers). */
const flag = (condition: string): string => `CASE WHEN ${condition} THEN 1 ELSE 0 END`;

interface MixArgs {
  key: string;
  run: number;
  iterations: number;
  holdMs: number;
  kinds: readonly ('permit' | 'write' | 'read')[];
}

export async function mix(ctx: WorkerContext<MixArgs>): Promise<{ done: number; errors: string[] }> {
  const { key, run, iterations, holdMs, kinds } = ctx.args;
  const ds = ctx.app.get(DataSource);
  const errors: string[] = [];
  let done = 0;
  // Every expression reads the row as it was (peak before np: MySQL would read an np assigned earlier in the SET).
  const enter: Record<string, string> = {
    permit: `UPDATE ${TABLE} SET bad = bad + ${flag('nw + nr > 0')} + ${flag(`np >= ${LIMIT}`)}, peak = GREATEST(peak, np + 1), np = np + 1 WHERE run = ?`,
    write: `UPDATE ${TABLE} SET bad = bad + ${flag('nw + nr + np > 0')}, nw = nw + 1 WHERE run = ?`,
    read: `UPDATE ${TABLE} SET bad = bad + ${flag('nw + np > 0')}, nr = nr + 1 WHERE run = ?`,
  };
  const leave: Record<string, string> = {
    permit: `UPDATE ${TABLE} SET np = np - 1 WHERE run = ?`,
    write: `UPDATE ${TABLE} SET nw = nw - 1 WHERE run = ?`,
    read: `UPDATE ${TABLE} SET nr = nr - 1 WHERE run = ?`,
  };
  const inside = async (kind: string): Promise<void> => {
    await runSql(ds, enter[kind]!, [run]);
    await sleep(holdMs);
    await runSql(ds, leave[kind]!, [run]);
    done++;
  };
  const loop = async (kind: 'permit' | 'write' | 'read'): Promise<void> => {
    for (let i = 0; i < iterations; i++) {
      try {
        if (kind === 'permit') await ctx.locks.withSemaphore(key, LIMIT, () => inside(kind), { timeoutMs: 30_000 });
        else await ctx.locks.withLock(key, () => inside(kind), { mode: kind, timeoutMs: 30_000 });
      } catch (error) {
        errors.push(`${kind}: ${(error as Error).name}: ${(error as Error).message}`);
      }
    }
  };
  await Promise.all(kinds.map(loop));
  return { done, errors };
}

if (!process.env.DB_LOCK_WORKER) {
  contractSuite('semaphore', 'permits, writers and readers of one key across processes', { postgres: true }, (target) => {
    let db: TestDatabase;
    let workers: LockWorker[] = [];
    before(async () => {
      db = await TestDatabase.forTarget(target);
      await db.query(
        `CREATE TABLE ${TABLE} (run INT PRIMARY KEY, np INT NOT NULL DEFAULT 0, nw INT NOT NULL DEFAULT 0, nr INT NOT NULL DEFAULT 0, ` +
          `bad INT NOT NULL DEFAULT 0, peak INT NOT NULL DEFAULT 0)${db.sql.tableOptions}`,
      );
      workers = await LockWorker.startMany(3, {
        settings: db.settings,
        options: target.options({ leaseMs: 5_000, retryMinDelayMs: 5, retryMaxDelayMs: 25, janitor: false }),
      });
    });
    after(async () => {
      await Promise.all(workers.map((w) => w.close()));
      await db?.drop();
    });

    it('never a writer beside anyone, a reader beside a permit, or more than `limit` permits', async () => {
      const run = 1;
      const key = 'mixed-key';
      await db.query(`INSERT INTO ${TABLE} (run) VALUES (?)`, [run]);
      const plans: MixArgs['kinds'][] = [
        ['permit', 'permit', 'write'],
        ['permit', 'write', 'read'],
        ['write', 'permit', 'read'],
      ];
      const results = await Promise.all(
        workers.map((w, i) => w.run<{ done: number; errors: string[] }>(SELF, 'mix', { key, run, iterations: 12, holdMs: 8, kinds: plans[i]! })),
      );
      const [row] = await db.query<Record<string, number>[]>(`SELECT * FROM ${TABLE} WHERE run = ?`, [run]);
      const errors = results.flatMap((r) => r.errors);
      assert.deepEqual(errors, [], 'no call failed');
      assert.equal(Number(row!.np) + Number(row!.nw) + Number(row!.nr), 0, 'everyone counted out');
      assert.equal(Number(row!.bad), 0, `${row!.bad} entries saw a conflicting holder inside (peak permits ${row!.peak})`);
      assert.ok(Number(row!.peak) <= LIMIT, `peak permits ${row!.peak} > ${LIMIT}`);
      const live = await db.query<{ n: number }[]>(`SELECT COUNT(*) AS n FROM db_lock_log WHERE status IN ('ACQUIRED','COMPLETED')`);
      assert.equal(Number(live[0]!.n), 0, 'no live row left');
      // tokens strictly per key: distinct
      const dup = await db.query<{ n: number }[]>(
        `SELECT COUNT(*) AS n FROM (SELECT fencing_token FROM db_lock_log WHERE status <> 'CLAIMED' AND mode <> 'read' GROUP BY lock_key, fencing_token HAVING COUNT(*) > 1) d`,
      );
      assert.equal(Number(dup[0]!.n), 0, 'a writer/permit token handed out twice');
    });
  });
}
