/**
 * Development probe: where the client CPU of an uncontended lease acquire + release goes, layer by
 * layer from a raw mysql2 connection up to LockService. `node build/test/bench/probe-lease-cpu.js [ops] [shape prefixes]`.
 */
import 'reflect-metadata';
import mysql from 'mysql2';
import { AsyncLocalStorage } from 'node:async_hooks';
import { createLockApp } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';
import { cpuOfShapes, runProbe, timeShapes } from './probe-main.js';
import { claimGrantShape, RELEASE_SHAPE } from './uncontended-items.js';
import { randomUUID } from 'node:crypto';
import { resolveTargets } from '../../lib/core/lock-key.js';
import { HeldLock } from '../../lib/core/held-lock.js';
import { fastSingleKeyGrantPlan } from '../../lib/store/mysql/fast-grant.sql.js';
import { endRowsPlan } from '../../lib/store/mysql/hold.sql.js';
import { RUNNING_PARTS } from '../../lib/lock-service.assembly.js';

async function main(): Promise<void> {
  const ops = Number(process.argv[2] ?? 2000);
  const db = await TestDatabase.create('dblock_lcpu');
  const app = await createLockApp(db.settings, { janitor: false });
  const pool = (
    RUNNING_PARTS.get(app.locks)!.store as unknown as { log: { pool: import('../../lib/store/mysql/lock-connection-pool.js').LockConnectionPool } }
  ).log.pool;
  const raw = mysql.createConnection({ ...db.settings });
  const q = (sql: string, p?: unknown[]) => new Promise<any>((res, rej) => raw.query(sql, p, (e, r) => (e ? rej(e) : res(r))));
  const rawPool = mysql.createPool({ ...db.settings, connectionLimit: 2 });
  const pq = (sql: string, p?: unknown[]) => new Promise<any>((res, rej) => rawPool.query(sql, p, (e, r) => (e ? rej(e) : res(r))));
  let t = 0;
  const parts = RUNNING_PARTS.get(app.locks)!;
  const log = (parts.store as any).log;
  const known = new Map<string, number>();
  const primer = await app.locks.acquire('lean');
  known.set('lean', primer.fencingToken);
  await primer.release();
  const als = new AsyncLocalStorage<number>();
  const realQuery = pool.query.bind(pool);
  let id = 1_000_000;
  let primed = false;
  const stubbed = async (idleMs: number, fn: () => Promise<void>) => {
    if (!primed) {
      primed = true;
      await fn(); // the key known free from here on: the claim grant
    }
    (pool as any).query = (sql: string) => {
      const answer = { insertId: ++id, affectedRows: 1 };
      return idleMs ? new Promise((r) => setTimeout(() => r(answer), idleMs)) : Promise.resolve(answer);
    };
    try {
      await fn();
    } finally {
      (pool as any).query = realQuery;
    }
  };
  const shapes: Record<string, () => Promise<unknown>> = {
    'raw conn (claim + end)': async () => {
      const r = await q(claimGrantShape(++t));
      await q(RELEASE_SHAPE, [r.insertId]);
    },
    // The library's statement text by hand: the server bound (SET STATEMENT) and the doorbell test in the claim, the release's status test.
    'raw conn, library text': async () => {
      const text = claimGrantShape(++t)
        .replace('INSERT', 'SET STATEMENT max_statement_time = 10.250 FOR INSERT')
        .replace(
          /, (\d+), 'ACQUIRED'/,
          ", IF(COALESCE(IS_USED_LOCK('dbl:abcdefabcdefabcdefabcdefabc'), CONNECTION_ID()) = CONNECTION_ID(), $1, NULL), 'ACQUIRED'",
        );
      const r = await q(text);
      await q(endRowsPlan([String(r.insertId)], 'RELEASED').statements[0]!);
    },
    'raw conn, bell test only': async () => {
      const text = claimGrantShape(++t).replace(
        /, (\d+), 'ACQUIRED'/,
        ", IF(COALESCE(IS_USED_LOCK('dbl:abcdefabcdefabcdefabcdefabc'), CONNECTION_ID()) = CONNECTION_ID(), $1, NULL), 'ACQUIRED'",
      );
      const r = await q(text);
      await q(RELEASE_SHAPE, [r.insertId]);
    },
    'raw conn, library release only': async () => {
      const r = await q(claimGrantShape(++t));
      await q(endRowsPlan([String(r.insertId)], 'RELEASED').statements[0]!);
    },
    'raw conn, IF(1) only': async () => {
      const r = await q(claimGrantShape(++t).replace(/, (\d+), 'ACQUIRED'/, ", IF(1, $1, NULL), 'ACQUIRED'"));
      await q(RELEASE_SHAPE, [r.insertId]);
    },
    'raw conn, IS_FREE_LOCK': async () => {
      const r = await q(
        claimGrantShape(++t).replace(/, (\d+), 'ACQUIRED'/, ", IF(IS_FREE_LOCK('dbl:abcdefabcdefabcdefabcdefabc'), $1, NULL), 'ACQUIRED'"),
      );
      await q(RELEASE_SHAPE, [r.insertId]);
    },
    'raw conn, release by id =': async () => {
      const r = await q(claimGrantShape(++t));
      await q(
        `UPDATE db_lock_log SET status = 'RELEASED', ended_at = UTC_TIMESTAMP(6), hold_ms = 0 WHERE id = ${r.insertId} AND status IN ('ACQUIRED', 'COMPLETED')`,
      );
    },
    'raw conn, release FORCE': async () => {
      const r = await q(claimGrantShape(++t));
      await q(`UPDATE db_lock_log FORCE INDEX (PRIMARY) SET status = 'RELEASED', ended_at = UTC_TIMESTAMP(6), hold_ms = 0 WHERE id = ${r.insertId}`);
    },
    'raw conn, release msSince': async () => {
      const r = await q(claimGrantShape(++t));
      await q(
        endRowsPlan([String(r.insertId)], 'RELEASED')
          .statements[0]!.replace(/ AND status IN \([^)]*\)/, '')
          .replace(' FORCE INDEX (PRIMARY)', ''),
      );
    },
    'raw conn, release FORCE+status': async () => {
      const r = await q(claimGrantShape(++t));
      await q(
        `UPDATE db_lock_log FORCE INDEX (PRIMARY) SET status = 'RELEASED', ended_at = UTC_TIMESTAMP(6), hold_ms = 3 WHERE id = ${r.insertId} AND status IN ('ACQUIRED', 'COMPLETED')`,
      );
    },
    'raw conn, IS_FREE + FORCE+status': async () => {
      const r = await q(
        claimGrantShape(++t).replace(/, (\d+), 'ACQUIRED'/, ", IF(IS_FREE_LOCK('dbl:abcdefabcdefabcdefabcdefabc'), $1, NULL), 'ACQUIRED'"),
      );
      await q(
        `UPDATE db_lock_log FORCE INDEX (PRIMARY) SET status = 'RELEASED', ended_at = UTC_TIMESTAMP(6), hold_ms = 3 WHERE id = ${r.insertId} AND status IN ('ACQUIRED', 'COMPLETED')`,
      );
    },
    'raw conn, bound only': async () => {
      const r = await q(claimGrantShape(++t).replace('INSERT', 'SET STATEMENT max_statement_time = 10.250 FOR INSERT'));
      await q(RELEASE_SHAPE, [r.insertId]);
    },
    'raw mysql2 pool': async () => {
      const r = await pq(claimGrantShape(++t));
      await pq(RELEASE_SHAPE, [r.insertId]);
    },
    'lock pool, deadline': async () => {
      const r = await pool.query<any>(claimGrantShape(++t), { purpose: 'locks', deadline: performance.now() + 5000 });
      await pool.query(RELEASE_SHAPE.replace('?', String(r.insertId)), { purpose: 'locks', deadline: performance.now() + 5000 });
    },
    'lock pool, no deadline': async () => {
      const r = await pool.query<any>(claimGrantShape(++t), { purpose: 'locks' });
      await pool.query(RELEASE_SHAPE.replace('?', String(r.insertId)), { purpose: 'locks' });
    },
    'lock pool, 10 async layers': async () => {
      const layer = async (n: number, f: () => Promise<unknown>): Promise<unknown> => (n === 0 ? f() : await layer(n - 1, f));
      const r = (await layer(10, () => pool.query<any>(claimGrantShape(++t), { purpose: 'locks' }))) as any;
      await layer(10, () => pool.query(RELEASE_SHAPE.replace('?', String(r.insertId)), { purpose: 'locks' }));
    },
    // The essential work only: the claim statement built by the library, sent on its pool, a HeldLock and its bookkeeping.
    'lean by hand': async () => {
      const key = 'lean';
      const targets = resolveTargets(key, 'write', '');
      const token = known.get(key);
      const input = {
        acquisitionId: randomUUID(),
        strategy: 'lease',
        targets,
        leaseMs: 30000,
        waitedMs: 0,
        writerWaitMarkMs: 0,
        writerPreference: true,
        holder: log.holder,
        processId: log.processId,
        claims: true,
      } as any;
      const plan = fastSingleKeyGrantPlan(input, () => Date.now(), token);
      const outcome = (await pool
        .query<any>(plan.statements.join(';'), { purpose: 'locks', deadline: performance.now() + 5000 })
        .then((r) => plan.parse(plan.statements.length === 1 ? [r] : r))) as any;
      const now = performance.now();
      const lock = new HeldLock(parts.runtime as any, 'lease', input.acquisitionId, targets, outcome.rows, 30000, now, now, 0);
      parts.watchdog.add(lock);
      const ended = await pool.query<any>(endRowsPlan(lock.rowIds, 'RELEASED').statements[0]!, {
        purpose: 'locks',
        deadline: performance.now() + 5000,
      });
      parts.watchdog.remove(lock);
      if (ended.affectedRows === 1) known.set(key, outcome.rows[0].fencingToken);
    },
    'service acquire + release': async () => void (await (await app.locks.acquire('la')).release()),
    'service hooks on': () => als.run(1, async () => void (await (await app.locks.acquire('lh')).release())),
    'service withLock': () => app.locks.withLock('lw', async () => undefined),
    // The same with the lock pool answering at once (hot), or after an idle millisecond (as a network wait leaves the CPU).
    'stub hot': () => stubbed(0, async () => void (await (await app.locks.acquire('la')).release())),
    'stub idle': () => stubbed(1, async () => void (await (await app.locks.acquire('la')).release())),
    'idle only': async () => {
      await new Promise((r) => setTimeout(r, 1));
      await new Promise((r) => setTimeout(r, 1));
    },
  };
  const chosen = Object.entries(shapes).filter(([n]) => !process.argv[3] || process.argv[3].split(',').some((p) => n.startsWith(p)));
  for (const [, fn] of chosen) for (let i = 0; i < 300; i++) await fn();
  if (process.env.PROBE_INTERLEAVE) {
    // Wall time only, op by op across the shapes: drift on the host hits every shape alike.
    const medians = await timeShapes(Object.fromEntries(chosen), Math.floor(ops / 5), { rounds: 5 });
    for (const [name, xs] of Object.entries(medians))
      console.log(`${name.padEnd(28)} wall ${(xs.sort((a, b) => a - b)[2]! * 1000).toFixed(0)} µs/op (median of 5 rounds' medians)`);
  }
  const samples = await cpuOfShapes(chosen, ops, 5);
  const median = (xs: number[]) => xs.sort((a, b) => a - b)[xs.length >> 1]!;
  for (const [name, s] of samples)
    console.log(`${name.padEnd(28)} CPU ${median(s.map((x) => x.cpu)) | 0} µs/op, wall ${median(s.map((x) => x.wall)).toFixed(3)} ms/op`);
  raw.end();
  rawPool.end();
  await app.app.close();
  await db.drop();
}

runProbe(main);
